// Ed25519 signatures of artifacts (libsodium). An artifact carries native
// code, so loading one is running it; the checksum only catches corruption.
// `q3c compile --sign KEY` embeds a detached signature over the artifact's
// bytes, `q3run --require-signature KEY.pub` refuses an artifact that lacks
// one or whose signature does not verify with that key, before any of its
// code is loaded. Layout and trust model: docs/artifact.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace q3::runtime {

constexpr size_t kPublicKeyBytes = 32;
constexpr size_t kSecretKeyBytes = 64; // libsodium's: seed then public key
constexpr size_t kSignatureBytes = 64;

struct PublicKey {
  std::array<uint8_t, kPublicKeyBytes> bytes{};
  std::string source; // the file it came from, for messages
};

struct SecretKey {
  std::array<uint8_t, kSecretKeyBytes> bytes{};
  std::string source;
  PublicKey publicKey() const;
  ~SecretKey(); // wipes the bytes
};

/// 16 hex digits that name a key in messages (its first 8 bytes).
std::string keyId(const PublicKey &key);

/// Writes a new key pair: `secretPath` (mode 0600) and `publicPath`, both
/// text files ("q3c ed25519 secret key" / "public key" and the key in hex).
/// Refuses to replace an existing file: a lost secret key cannot be remade.
/// Returns the public key.
PublicKey generateKeyPair(const std::string &secretPath, const std::string &publicPath);

/// Read key files; LoadError naming the file for anything else.
SecretKey readSecretKey(const std::string &path);
PublicKey readPublicKey(const std::string &path);

/// Ed25519ph (RFC 8032, the pre-hashed variant, libsodium's multi-part API)
/// over a message given in parts.
class SignatureStream {
public:
  SignatureStream();
  ~SignatureStream();
  void update(const uint8_t *bytes, size_t size);
  void updateZeros(size_t count);
  std::array<uint8_t, kSignatureBytes> sign(const SecretKey &key);
  bool verify(const uint8_t *signature, const PublicKey &key);

private:
  struct State;
  std::unique_ptr<State> state_;
};

} // namespace q3::runtime
