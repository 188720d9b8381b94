#include "runtime/Signature.h"

#include "runtime/AtomicFile.h"
#include "runtime/LoadError.h"

#include <fmt/format.h>
#include <sodium.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <sys/stat.h>

namespace q3::runtime {
namespace {

constexpr const char *kSecretHeader = "q3c ed25519 secret key";
constexpr const char *kPublicHeader = "q3c ed25519 public key";

void initSodium() {
  static const int result = sodium_init();
  if (result < 0)
    throw std::runtime_error("libsodium cannot be initialised");
}

std::string toHex(const uint8_t *bytes, size_t size) {
  std::string hex(size * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), bytes, size);
  hex.pop_back();
  return hex;
}

/// The key bytes of a key file: the header line, then hex.
template <size_t N>
std::array<uint8_t, N> readKeyFile(const std::string &path, const char *header) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0)
    throw LoadError(fmt::format("{}: cannot open: {}", printable(path), std::strerror(errno)));
  if (!S_ISREG(info.st_mode) || info.st_size > 4096)
    throw LoadError(fmt::format("{}: expected a key file ({})", printable(path), header));
  std::ifstream in(path);
  std::string first, hex;
  std::getline(in, first);
  std::getline(in, hex);
  while (!hex.empty() && (hex.back() == '\r' || hex.back() == ' '))
    hex.pop_back();
  if (first != header)
    throw LoadError(fmt::format("{}: expected a key file whose first line is \"{}\", found \"{}\"",
                                printable(path), header, printable(first.substr(0, 40))));
  std::array<uint8_t, N> bytes{};
  size_t length = 0;
  if (hex.size() != 2 * N ||
      sodium_hex2bin(bytes.data(), N, hex.data(), hex.size(), nullptr, &length, nullptr) != 0 ||
      length != N)
    throw LoadError(fmt::format("{}: expected {} hex digits on the second line", printable(path),
                                2 * N));
  return bytes;
}

} // namespace

PublicKey SecretKey::publicKey() const {
  PublicKey key;
  crypto_sign_ed25519_sk_to_pk(key.bytes.data(), bytes.data());
  key.source = source;
  return key;
}

SecretKey::~SecretKey() { sodium_memzero(bytes.data(), bytes.size()); }

std::string keyId(const PublicKey &key) { return toHex(key.bytes.data(), 8); }

PublicKey generateKeyPair(const std::string &secretPath, const std::string &publicPath) {
  initSodium();
  for (const std::string &path : {secretPath, publicPath}) {
    struct stat info;
    if (::lstat(path.c_str(), &info) == 0)
      throw OutputError(fmt::format("{}: already exists; q3c keygen never replaces a key (a lost "
                                    "secret key cannot be made again): remove it or choose "
                                    "another name",
                                    printable(path)));
  }
  SecretKey secret;
  PublicKey key;
  crypto_sign_keypair(key.bytes.data(), secret.bytes.data());
  std::string secretText = std::string(kSecretHeader) + "\n" +
                           toHex(secret.bytes.data(), secret.bytes.size()) + "\n";
  {
    AtomicFile file(secretPath, 0600);
    file.write(secretText);
    file.commit();
  }
  sodium_memzero(secretText.data(), secretText.size());
  writeFileAtomically(publicPath, std::string(kPublicHeader) + "\n" +
                                      toHex(key.bytes.data(), key.bytes.size()) + "\n");
  key.source = publicPath;
  return key;
}

SecretKey readSecretKey(const std::string &path) {
  initSodium();
  SecretKey key;
  key.bytes = readKeyFile<kSecretKeyBytes>(path, kSecretHeader);
  key.source = path;
  // The second half is the public key: a file edited by hand would sign
  // with one key and name another.
  uint8_t derived[crypto_sign_PUBLICKEYBYTES], seedKey[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(derived, seedKey, key.bytes.data());
  const bool consistent = std::memcmp(seedKey, key.bytes.data(), sizeof seedKey) == 0;
  sodium_memzero(seedKey, sizeof seedKey);
  if (!consistent)
    throw LoadError(fmt::format("{}: not a valid ed25519 secret key (its public half does not "
                                "belong to its seed)",
                                printable(path)));
  return key;
}

PublicKey readPublicKey(const std::string &path) {
  initSodium();
  PublicKey key;
  key.bytes = readKeyFile<kPublicKeyBytes>(path, kPublicHeader);
  key.source = path;
  return key;
}

struct SignatureStream::State {
  crypto_sign_state sodium;
};

SignatureStream::SignatureStream() : state_(std::make_unique<State>()) {
  initSodium();
  crypto_sign_init(&state_->sodium);
}

SignatureStream::~SignatureStream() = default;

void SignatureStream::update(const uint8_t *bytes, size_t size) {
  if (size != 0)
    crypto_sign_update(&state_->sodium, bytes, size);
}

void SignatureStream::updateZeros(size_t count) {
  static const uint8_t zeros[256] = {};
  for (; count > 0;) {
    size_t chunk = std::min(count, sizeof zeros);
    update(zeros, chunk);
    count -= chunk;
  }
}

std::array<uint8_t, kSignatureBytes> SignatureStream::sign(const SecretKey &key) {
  std::array<uint8_t, kSignatureBytes> signature{};
  crypto_sign_final_create(&state_->sodium, signature.data(), nullptr, key.bytes.data());
  return signature;
}

bool SignatureStream::verify(const uint8_t *signature, const PublicKey &key) {
  return crypto_sign_final_verify(&state_->sodium, signature, key.bytes.data()) == 0;
}

} // namespace q3::runtime
