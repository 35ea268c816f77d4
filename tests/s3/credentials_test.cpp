#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "common/error.h"
#include "s3/credentials.h"
#include "support/temp_dir.h"

namespace tp::s3 {
namespace {

// Sets and clears the variables the resolver reads, restoring them afterwards.
class ScopedEnvironment {
 public:
  ScopedEnvironment() {
    for (const char* name : kNames) {
      const char* value = std::getenv(name);
      if (value != nullptr) saved_[name] = value;
      ::unsetenv(name);
    }
  }
  ~ScopedEnvironment() {
    for (const char* name : kNames) {
      const auto found = saved_.find(name);
      if (found == saved_.end()) {
        ::unsetenv(name);
      } else {
        ::setenv(name, found->second.c_str(), 1);
      }
    }
  }
  void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

 private:
  static constexpr const char* kNames[] = {"AWS_ACCESS_KEY_ID",
                                           "AWS_SECRET_ACCESS_KEY",
                                           "AWS_SESSION_TOKEN",
                                           "AWS_ENDPOINT_URL",
                                           "AWS_ENDPOINT_URL_S3",
                                           "S3_ENDPOINT_URL",
                                           "MINIO_URL",
                                           "AWS_REGION",
                                           "AWS_DEFAULT_REGION",
                                           "AWS_PROFILE",
                                           "AWS_CA_BUNDLE",
                                           "AWS_SHARED_CREDENTIALS_FILE",
                                           "AWS_CONFIG_FILE",
                                           "TRAINPOINT_S3_CREDENTIALS",
                                           "TRAINPOINT_S3_TENANT",
                                           "TRAINPOINT_VAULT_SECRETS_DIR",
                                           "HOME"};
  std::map<std::string, std::string> saved_;
};

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    environment_.set("HOME", (home_.path()).string());
    environment_.set("TRAINPOINT_VAULT_SECRETS_DIR", (vault_.path()).string());
  }
  ScopedEnvironment environment_;
  testing::TempDir home_;
  testing::TempDir vault_;
};

TEST_F(CredentialsTest, AnonymousOnAwsByDefault) {
  const Connection connection = resolve_connection({});
  EXPECT_TRUE(connection.credentials.anonymous());
  EXPECT_EQ(connection.region, "us-east-1");
  EXPECT_EQ(connection.endpoint, "https://s3.us-east-1.amazonaws.com");
  EXPECT_FALSE(connection.path_style);
}

TEST_F(CredentialsTest, EnvironmentWithSessionTokenAndEndpointOrder) {
  environment_.set("AWS_ACCESS_KEY_ID", "AKIDENV");
  environment_.set("AWS_SECRET_ACCESS_KEY", "very-secret");
  environment_.set("AWS_SESSION_TOKEN", "token");
  environment_.set("MINIO_URL", "http://minio:9000");
  environment_.set("S3_ENDPOINT_URL", "http://s3-endpoint:9000/");
  environment_.set("AWS_REGION", "eu-central-1");
  Connection connection = resolve_connection({});
  EXPECT_EQ(connection.credentials.access_key_id, "AKIDENV");
  EXPECT_EQ(connection.credentials.session_token, "token");
  EXPECT_EQ(connection.endpoint, "http://s3-endpoint:9000");
  EXPECT_TRUE(connection.path_style);
  EXPECT_EQ(connection.region, "eu-central-1");
  EXPECT_EQ(connection.credentials.source.find("very-secret"), std::string::npos);

  environment_.set("AWS_ENDPOINT_URL", "http://generic:1");
  EXPECT_EQ(resolve_connection({}).endpoint, "http://generic:1");
  environment_.set("AWS_ENDPOINT_URL_S3", "http://s3-specific:2");
  EXPECT_EQ(resolve_connection({}).endpoint, "http://s3-specific:2");
  ConnectionOptions options;
  options.endpoint = "https://explicit.example.com";
  EXPECT_EQ(resolve_connection(options).endpoint, "https://explicit.example.com");
}

TEST_F(CredentialsTest, AnEndpointThatIsNotAUrlIsAUsageErrorNamingWhereItCameFrom) {
  // Found by the s3_credentials fuzzer: "https:host://" lost its "://" to the trailing-slash trim.
  for (const std::string endpoint : {"https:minio.example://", "ftp://minio:9000", "https://", "http:///bucket"}) {
    environment_.set("MINIO_URL", endpoint);
    try {
      resolve_connection({});
      FAIL() << endpoint << " must be refused";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::usage);
      const std::string message = error.what();
      EXPECT_NE(message.find("'" + endpoint + "' from MINIO_URL is not a URL"), std::string::npos) << message;
    }
  }
  environment_.set("MINIO_URL", "minio.minio:9000/");
  EXPECT_EQ(resolve_connection({}).endpoint, "https://minio.minio:9000");
  environment_.set("MINIO_URL", "HTTP://[::1]:9000");
  EXPECT_EQ(resolve_connection({}).endpoint, "HTTP://[::1]:9000");
}

TEST_F(CredentialsTest, VaultShellFileGivesKeysAndEndpoint) {
  testing::write_text(vault_ / "minio-team",
                      "# rendered by vault\nexport MINIO_URL=\"http://minio.minio:9000\"\n"
                      "export MINIO_ACCESS_KEY='team-key'\nexport MINIO_SECRET_KEY=team-secret\n");
  const Connection connection = resolve_connection({});
  EXPECT_EQ(connection.credentials.access_key_id, "team-key");
  EXPECT_EQ(connection.credentials.secret_access_key, "team-secret");
  EXPECT_EQ(connection.endpoint, "http://minio.minio:9000");
  EXPECT_NE(connection.credentials.source.find("minio-team"), std::string::npos);
  EXPECT_EQ(connection.credentials.source.find("team-secret"), std::string::npos);
}

TEST_F(CredentialsTest, VaultJsonTwinAndTenantSelection) {
  testing::write_text(vault_ / "minio-a.json",
                      R"({"url": "http://a:9000", "accessKey": "a-key", "secretKey": "a-secret"})");
  testing::write_text(vault_ / "minio-b",
                      "export MINIO_ACCESS_KEY=b-key\nexport MINIO_SECRET_KEY=b-secret\n");
  try {
    resolve_connection({});
    FAIL() << "two tenants and none named must fail";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    EXPECT_NE(std::string(error.what()).find("minio-a"), std::string::npos);
  }
  ConnectionOptions options;
  options.tenant = "a";
  const Connection connection = resolve_connection(options);
  EXPECT_EQ(connection.credentials.access_key_id, "a-key");
  EXPECT_EQ(connection.endpoint, "http://a:9000");
  options.tenant = "missing";
  EXPECT_THROW(resolve_connection(options), Error);
}

TEST_F(CredentialsTest, ExplicitFileComesBeforeEnvironment) {
  environment_.set("AWS_ACCESS_KEY_ID", "AKIDENV");
  environment_.set("AWS_SECRET_ACCESS_KEY", "env-secret");
  testing::write_text(home_ / "creds", "AWS_ACCESS_KEY_ID=file-key\nAWS_SECRET_ACCESS_KEY=file-secret\n");
  ConnectionOptions options;
  options.credentials_file = (home_ / "creds").string();
  EXPECT_EQ(resolve_connection(options).credentials.access_key_id, "file-key");
  options.credentials_file = (home_ / "absent").string();
  EXPECT_THROW(resolve_connection(options), Error);
}

TEST_F(CredentialsTest, AwsSharedFilesWithProfile) {
  testing::write_text(home_ / ".aws/credentials",
                      "[default]\naws_access_key_id = default-key\naws_secret_access_key = default-secret\n"
                      "[train]\naws_access_key_id = train-key\naws_secret_access_key = train-secret\n"
                      "aws_session_token = train-token\n");
  testing::write_text(home_ / ".aws/config", "[profile train]\nregion = ap-south-1\n");
  EXPECT_EQ(resolve_connection({}).credentials.access_key_id, "default-key");
  environment_.set("AWS_PROFILE", "train");
  const Connection connection = resolve_connection({});
  EXPECT_EQ(connection.credentials.access_key_id, "train-key");
  EXPECT_EQ(connection.credentials.session_token, "train-token");
  EXPECT_EQ(connection.region, "ap-south-1");
  EXPECT_EQ(connection.endpoint, "https://s3.ap-south-1.amazonaws.com");
  environment_.set("AWS_PROFILE", "nope");
  EXPECT_THROW(resolve_connection({}), Error);
}

// Found by tests/fuzz (s3_credentials): an empty aws_secret_access_key gave a key pair without a secret
// (every request then failed with 403); now an empty value counts as absent, as a missing line does.
TEST_F(CredentialsTest, AwsSharedFileWithAnEmptySecretIsNoKeyPair) {
  testing::write_text(home_ / ".aws/credentials", "[default]\naws_access_key_id = key\naws_secret_access_key =\n");
  testing::write_text(home_ / ".aws/config", "[default]\naws_access_key_id = key2\naws_secret_access_key = secret2\n");
  const Connection connection = resolve_connection({});
  EXPECT_EQ(connection.credentials.access_key_id, "key2");
  EXPECT_EQ(connection.credentials.secret_access_key, "secret2");
  testing::write_text(home_ / ".aws/config", "");
  EXPECT_TRUE(resolve_connection({}).credentials.anonymous());
}

}  // namespace
}  // namespace tp::s3
