// SigV4 proved two ways: AWS's published S3 examples (sig-v4-header-based-auth, "Examples"), and botocore's
// S3SigV4Auth as an independent oracle on generated requests.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "s3/checksums.h"
#include "s3/sigv4.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::s3 {
namespace {

const Credentials kExampleCredentials{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "",
                                      "docs"};
constexpr std::time_t kExampleTime = 1369353600;  // 2013-05-24T00:00:00Z
constexpr char kExampleHost[] = "examplebucket.s3.amazonaws.com";

std::string authorization(const SignedRequest& signed_request) {
  for (const auto& [name, value] : signed_request.headers) {
    if (name == "Authorization") return value;
  }
  return {};
}

TEST(SigV4Test, PublishedGetObjectWithRangeExample) {
  SignableRequest request{"GET", kExampleHost, "/test.txt", {}, {{"Range", "bytes=0-9"}}};
  const SignedRequest signed_request = sign(request, kExampleCredentials, "us-east-1", kExampleTime);
  EXPECT_EQ(signed_request.canonical_request,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(signed_request.string_to_sign,
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(authorization(signed_request),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4Test, PublishedPutObjectExample) {
  const std::string body = "Welcome to Amazon S3.";
  SignableRequest request{
      "PUT",
      kExampleHost,
      "/test$file.text",
      {},
      {{"Date", "Fri, 24 May 2013 00:00:00 GMT"}, {"x-amz-storage-class", "REDUCED_REDUNDANCY"}},
      sha256_hex(body)};
  EXPECT_EQ(request.payload_sha256, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  const SignedRequest signed_request = sign(request, kExampleCredentials, "us-east-1", kExampleTime);
  EXPECT_NE(signed_request.canonical_request.find("PUT\n/test%24file.text\n"), std::string::npos);
  EXPECT_EQ(signed_request.signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
  EXPECT_NE(authorization(signed_request)
                .find("SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"),
            std::string::npos);
}

TEST(SigV4Test, PublishedGetBucketLifecycleExample) {
  SignableRequest request{"GET", kExampleHost, "/", {{"lifecycle", ""}}, {}};
  const SignedRequest signed_request = sign(request, kExampleCredentials, "us-east-1", kExampleTime);
  EXPECT_NE(signed_request.canonical_request.find("GET\n/\nlifecycle=\n"), std::string::npos);
  EXPECT_EQ(signed_request.signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4Test, PublishedListObjectsExampleSortsTheQuery) {
  SignableRequest request{"GET", kExampleHost, "/", {{"prefix", "J"}, {"max-keys", "2"}}, {}};
  const SignedRequest signed_request = sign(request, kExampleCredentials, "us-east-1", kExampleTime);
  EXPECT_NE(signed_request.canonical_request.find("\nmax-keys=2&prefix=J\n"), std::string::npos);
  EXPECT_EQ(signed_request.signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4Test, TheCanonicalQueryIsEncodedAndSorted) {
  EXPECT_EQ(canonical_query({{"b", "x y"}, {"a", ""}, {"a-b", "1/2"}}), "a=&a-b=1%2F2&b=x%20y");
}

TEST(ChecksumTest, KnownVectors) {
  auto run = [](Digest::Algorithm algorithm) {
    Digest digest(algorithm);
    digest.update("123456789", 9);
    return hex(digest.finish());
  };
  EXPECT_EQ(run(Digest::Algorithm::crc32), "cbf43926");
  EXPECT_EQ(run(Digest::Algorithm::crc32c), "e3069283");
  EXPECT_EQ(run(Digest::Algorithm::crc64nvme), "ae8b14860a799888");  // CRC-64/NVME's check value
  EXPECT_EQ(run(Digest::Algorithm::md5), "25f9e794323b453885f5181f1b624d0b");
  EXPECT_EQ(base64("Hello"), "SGVsbG8=");
}

// A CRC fed in two pieces, and two CRCs combined, equal the CRC of the whole: how multipart uploads and
// ranged downloads get an object's checksum.
TEST(ChecksumTest, CrcsContinueAndCombine) {
  const std::string text = "123456789 and some more bytes";
  for (const auto algorithm : {Digest::Algorithm::crc64nvme, Digest::Algorithm::crc32c}) {
    Digest whole(algorithm);
    whole.update(text.data(), text.size());
    const std::string expected = whole.finish();
    Digest first(algorithm), second(algorithm), continued(algorithm);
    first.update(text.data(), 9);
    second.update(text.data() + 9, text.size() - 9);
    continued.update(text.data(), 9);
    continued.update(text.data() + 9, text.size() - 9);
    EXPECT_EQ(hex(continued.finish()), hex(expected));
    EXPECT_EQ(hex(concatenate_crcs(algorithm, {{first.finish(), 9}, {second.finish(), text.size() - 9}})),
              hex(expected));
  }
}

// A Python interpreter with botocore: Debian's python3-botocore, or the one the awscli runs on.
std::string python_with_botocore() {
  for (const std::string candidate :
       {"/usr/bin/python3", "python3", "$(head -1 \"$(pyenv which aws 2>/dev/null)\" | sed 's/^#!//')"}) {
    if (testing::run_command(candidate + " -c 'import botocore.auth'").exit_code == 0) return candidate;
  }
  return {};
}

TEST(SigV4Test, MatchesBotocoreOnGeneratedRequests) {
  const std::string python = python_with_botocore();
  ASSERT_FALSE(python.empty()) << "no python3 with botocore (install python3-botocore)";

  // Keys and values with the characters that encoders get wrong.
  const std::vector<std::string> pieces = {"a",    "Z", "0", " ", "+", "~", "=", "&", "?",  "#", "%",
                                           "$",    "!", "*", "'", "(", ")", ":", "@", ",",  ";", "é",
                                           "日本", "😀", "/", "-", "_", ".", "[", "]", "\"", "<", "`"};
  const std::vector<std::string> param_names = {"prefix",    "list-type",  "continuation-token",
                                                "uploadId",  "partNumber", "max-keys",
                                                "delimiter", "x-id",       "start-after"};
  std::mt19937 random(20130524);
  auto pick = [&](const std::vector<std::string>& from) { return from[random() % from.size()]; };
  auto text = [&](int length) {
    std::string out;
    for (int i = 0; i < length; ++i) out += pick(pieces);
    return out;
  };

  nlohmann::json requests = nlohmann::json::array();
  std::vector<std::string> expected_canonical;
  std::vector<std::string> expected_authorization;
  for (int i = 0; i < 300; ++i) {
    SignableRequest request;
    request.method = std::vector<std::string>{"GET", "PUT", "HEAD", "POST", "DELETE"}[random() % 5];
    request.host = i % 3 == 0   ? "127.0.0.1:9000"
                   : i % 3 == 1 ? "minio.example.com"
                                : "bucket.s3.eu-west-1.amazonaws.com";
    request.path = "/bucket/" + text(1 + static_cast<int>(random() % 12));
    const int param_count = static_cast<int>(random() % 4);
    std::vector<std::string> names = param_names;
    std::shuffle(names.begin(), names.end(), random);
    for (int p = 0; p < param_count; ++p)
      request.query.emplace_back(names[static_cast<std::size_t>(p)], text(static_cast<int>(random() % 6)));
    if (random() % 2) request.headers.emplace_back("Range", "bytes=" + std::to_string(random() % 1000) + "-");
    if (random() % 2) request.headers.emplace_back("x-amz-meta-note", "  spaced   value " + text(3) + "  ");
    if (random() % 3 == 0) request.headers.emplace_back("Content-Type", "application/octet-stream");
    request.payload_sha256 = random() % 2 ? std::string(kUnsignedPayload) : sha256_hex(text(5));
    Credentials credentials{"AKID" + std::to_string(i), "secret/" + text(4),
                            random() % 2 ? "token+/=" + std::to_string(i) : "", "test"};
    const std::string region = random() % 2 ? "us-east-1" : "eu-west-1";
    const std::time_t now = 1700000000 + static_cast<std::time_t>(random() % 100000000);
    const SignedRequest signed_request = sign(request, credentials, region, now);
    expected_canonical.push_back(signed_request.canonical_request);
    expected_authorization.push_back(authorization(signed_request));
    requests.push_back({{"method", request.method},
                        {"scheme", "https"},
                        {"host", request.host},
                        {"path", request.path},
                        {"params", request.query},
                        {"headers", request.headers},
                        {"payload_sha256", request.payload_sha256},
                        {"access_key", credentials.access_key_id},
                        {"secret_key", credentials.secret_access_key},
                        {"token", credentials.session_token},
                        {"region", region},
                        {"timestamp", amz_date(now)}});
  }
  testing::TempDir directory;
  testing::write_text(directory / "requests.json", requests.dump());
  const auto result = testing::run_command(
      python + " " + testing::shell_quote(testing::source_dir() + "/tests/s3/botocore_sign.py") + " < " +
      testing::shell_quote((directory / "requests.json").string()) + " 2>/dev/null");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto oracle = nlohmann::json::parse(result.output);
  ASSERT_EQ(oracle.size(), expected_authorization.size());
  for (std::size_t i = 0; i < oracle.size(); ++i) {
    EXPECT_EQ(oracle[i]["canonical_request"].get<std::string>(), expected_canonical[i]) << "request " << i;
    EXPECT_EQ(oracle[i]["authorization"].get<std::string>(), expected_authorization[i]) << "request " << i;
  }
}

}  // namespace
}  // namespace tp::s3
