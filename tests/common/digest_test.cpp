// common/digest.h against the known answers of FIPS 180-2, RFC 1321, RFC 2202 and RFC 4231.
#include "common/digest.h"

#include <gtest/gtest.h>

#include <fstream>

#include "support/temp_dir.h"

namespace tp {
namespace {

TEST(Digest, KnownAnswers) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(digest(HashAlgorithm::md5, "abc")), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(hex(digest(HashAlgorithm::sha1, "abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(hex(hmac(HashAlgorithm::sha256, "Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex(hmac(HashAlgorithm::sha1, "Jefe", "what do ya want for nothing?")),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
}

TEST(Digest, FedInPiecesItIsTheDigestOfTheWhole) {
  Hasher hasher(HashAlgorithm::sha256);
  hasher.update("a");
  hasher.update("bc");
  EXPECT_EQ(hex(hasher.finish()), sha256_hex("abc"));
}

TEST(Digest, AFilesDigestIsItsContentsAndAMissingFileNamesTheClass) {
  testing::TempDir dir;
  const auto file = dir.path() / "abc";
  std::ofstream(file) << "abc";
  EXPECT_EQ(file_digest_hex(file, HashAlgorithm::sha256, ExitCode::output), sha256_hex("abc"));
  try {
    file_digest_hex(dir.path() / "missing", HashAlgorithm::md5, ExitCode::source);
    FAIL() << "no exception";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::source);
    EXPECT_NE(std::string(error.what()).find("missing"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace tp
