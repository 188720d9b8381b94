// Signed artifacts: a good signature loads, a missing one, another signer's
// and bytes changed after signing (with a re-sealed checksum, as an attacker
// would) are each refused with their own one-line message; keys are never
// overwritten and the secret one is private.
#include "TestFiles.h"

#include "runtime/Artifact.h"
#include "runtime/AtomicFile.h"
#include "runtime/Signature.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

namespace q3::runtime {
namespace {

using Json = nlohmann::json;
using testing::TempDir;

const Json kManifest = {{"format", "test"}, {"n", 1}};
const std::vector<ArtifactSection> kSections = {
    {"kernels.so", SectionKind::Executable, std::vector<uint8_t>(300, 0x90)},
    {"notes", SectionKind::Data, std::vector<uint8_t>(70, 'n')}};

struct Keys {
  TempDir dir;
  SecretKey secret;
  PublicKey publicKey;
  Keys() {
    generateKeyPair(dir.file("key"), dir.file("key.pub"));
    secret = readSecretKey(dir.file("key"));
    publicKey = readPublicKey(dir.file("key.pub"));
  }
};

void reseal(std::vector<uint8_t> &image) {
  uint64_t sum = artifactChecksum(image.data(), image.size());
  for (int i = 0; i < 8; ++i)
    image[kArtifactChecksumOffset + i] = uint8_t(sum >> (8 * i));
}

std::string verifyError(const std::vector<uint8_t> &image, const PublicKey &key) {
  auto artifact = Artifact::parse("m.q3", image.data(), image.size());
  try {
    artifact->verifySignature(key);
  } catch (const LoadError &error) {
    return error.what();
  }
  return "";
}

TEST(ArtifactSignature, AGoodSignatureVerifies) {
  Keys keys;
  EXPECT_EQ(keys.secret.publicKey().bytes, keys.publicKey.bytes);
  std::vector<uint8_t> image = serializeArtifact("m.q3", kManifest, kSections, &keys.secret);
  auto artifact = Artifact::parse("m.q3", image.data(), image.size());
  const Artifact::Section *signature = artifact->find(kSignatureSectionName);
  ASSERT_NE(signature, nullptr);
  EXPECT_EQ(signature->size, kArtifactSignaturePayload);
  EXPECT_EQ(&artifact->sections().back(), signature) << "the signature is the last section";
  EXPECT_NO_THROW(artifact->verifySignature(keys.publicKey));
  // Written to a file and read back: the same.
  writeArtifact(keys.dir.file("m.q3"), kManifest, kSections, &keys.secret);
  EXPECT_NO_THROW(Artifact::open(keys.dir.file("m.q3"))->verifySignature(keys.publicKey));
}

TEST(ArtifactSignature, AMissingSignatureIsRefused) {
  Keys keys;
  std::vector<uint8_t> image = serializeArtifact("m.q3", kManifest, kSections);
  EXPECT_EQ(verifyError(image, keys.publicKey),
            "m.q3: not signed, but a signature by key " + keyId(keys.publicKey) + " (" +
                keys.dir.file("key.pub") + ") is required: sign it with q3c compile --sign");
}

TEST(ArtifactSignature, AnotherSignersKeyIsRefused) {
  Keys mine, theirs;
  std::vector<uint8_t> image = serializeArtifact("m.q3", kManifest, kSections, &theirs.secret);
  EXPECT_EQ(verifyError(image, mine.publicKey),
            "m.q3: signed by key " + keyId(theirs.publicKey) + ", not by the required key " +
                keyId(mine.publicKey) + " (" + mine.dir.file("key.pub") + ")");
}

TEST(ArtifactSignature, AnyChangedByteIsRefusedEvenWithAResealedChecksum) {
  Keys keys;
  const std::vector<uint8_t> good =
      serializeArtifact("m.q3", kManifest, kSections, &keys.secret);
  auto artifact = Artifact::parse("m.q3", good.data(), good.size());
  const size_t code = size_t(artifact->find("kernels.so")->data - good.data());
  const size_t signature = size_t(artifact->find(kSignatureSectionName)->data - good.data());
  // A byte of code, of the manifest, of the table, and of the signature itself.
  for (size_t at : {code + 10, size_t(artifact->find("manifest")->data - good.data()) + 2,
                    size_t(64 + 64 + 30), signature + 8 + kPublicKeyBytes + 5}) {
    std::vector<uint8_t> image = good;
    image[at] ^= 0x01;
    reseal(image);
    std::string message;
    try {
      message = verifyError(image, keys.publicKey);
    } catch (const LoadError &error) { // a changed table may not even parse
      message = error.what();
    }
    EXPECT_FALSE(message.empty()) << "byte " << at << " changed and still verified";
    if (at != size_t(64 + 64 + 30)) {
      EXPECT_EQ(message, "m.q3: the signature does not verify with key " +
                             keyId(keys.publicKey) + " (" + keys.dir.file("key.pub") +
                             "): the artifact was changed after it was signed")
          << "byte " << at;
    }
  }
}

TEST(ArtifactSignature, TheNameIsReservedForTheSignature) {
  try {
    serializeArtifact("m.q3", kManifest, {{"signature", SectionKind::Data, {1, 2, 3}}});
    FAIL() << "expected a LoadError";
  } catch (const LoadError &error) {
    EXPECT_STREQ(error.what(), "m.q3: section 'signature': name: reserved for the signature");
  }
}

TEST(SignatureKeys, KeygenNeverReplacesAKeyAndKeepsTheSecretPrivate) {
  TempDir dir;
  generateKeyPair(dir.file("key"), dir.file("key.pub"));
  struct stat info;
  ASSERT_EQ(::stat(dir.file("key").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  const std::vector<uint8_t> before = [&] {
    std::ifstream in(dir.file("key"), std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
  }();
  EXPECT_THROW(generateKeyPair(dir.file("key"), dir.file("other.pub")), OutputError);
  EXPECT_THROW(generateKeyPair(dir.file("other"), dir.file("key.pub")), OutputError);
  std::ifstream in(dir.file("key"), std::ios::binary);
  EXPECT_EQ(std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {}), before);
}

TEST(SignatureKeys, BadKeyFilesNameTheFile) {
  TempDir dir;
  generateKeyPair(dir.file("key"), dir.file("key.pub"));
  EXPECT_LOAD_ERROR(readPublicKey(dir.file("key")),
                    "key: expected a key file whose first line is \"q3c ed25519 public key\"");
  EXPECT_LOAD_ERROR(readSecretKey(dir.file("key.pub")),
                    "key.pub: expected a key file whose first line is \"q3c ed25519 secret key\"");
  testing::writeText(dir.file("short.pub"), "q3c ed25519 public key\nabcd\n");
  EXPECT_LOAD_ERROR(readPublicKey(dir.file("short.pub")), "expected 64 hex digits");
  EXPECT_LOAD_ERROR(readPublicKey(dir.file("absent.pub")), "absent.pub: cannot open: No such file");
  // A secret key whose public half was edited.
  std::ifstream in(dir.file("key"));
  std::string header, hex;
  std::getline(in, header);
  std::getline(in, hex);
  hex[100] = hex[100] == '0' ? '1' : '0';
  testing::writeText(dir.file("edited"), header + "\n" + hex + "\n");
  EXPECT_LOAD_ERROR(readSecretKey(dir.file("edited")), "not a valid ed25519 secret key");
}

} // namespace
} // namespace q3::runtime
