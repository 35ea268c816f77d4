// The Python environment of job.requirements, built against a real package index on loopback
// (PackageIndex: python3 -m http.server over wheels and sdists made with pip wheel): pip's failures
// become trainpoint's classes naming the package, a torch pin is refused before anything is
// installed, an environment over a virtual environment (the gpu image's /opt/venv) sees its packages,
// and index credentials stay out of messages and logs.
#include <gtest/gtest.h>

#include <cstdlib>

#include "command/pip.h"
#include "command/python_environment.h"
#include "common/error.h"
#include "common/files.h"
#include "package_index.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::shell_quote;

// Debian's python3-torch is for this interpreter (the python3 first in PATH may be another).
const fs::path kPython = "/usr/bin/python3";

class PythonEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    // Only what a test gives pip: the machine's own pip settings stay out.
    for (const char* name : {"PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"}) {
      ::unsetenv(name);
    }
  }

  command::EnvironmentRequest request(const std::string& requirements, const fs::path& python = kPython) {
    testing::write_text(dir / "repo" / "requirements.txt", requirements);
    return {dir / "repo" / "requirements.txt", "requirements.txt", python, dir / "cache",
            {{"PIP_INDEX_URL", index.url()}, {"PIP_NO_CACHE_DIR", "1"}}};
  }

  // The error prepare_environment throws for `requirements`.
  Error failure(const command::EnvironmentRequest& environment) {
    try {
      command::prepare_environment(environment);
    } catch (const Error& error) {
      return error;
    }
    ADD_FAILURE() << "prepare_environment succeeded";
    return Error(ExitCode::ok, "");
  }

  fs::path environment_of(const command::EnvironmentRequest& environment) {
    return command::environment_path(environment.cache_dir, command::probe_interpreter(environment.python),
                                     read_file(environment.requirements, ExitCode::internal));
  }

  testing::TempDir dir;
  testing::PackageIndex index{dir / "index.log"};
};

TEST_F(PythonEnvironment, AMissingPackageIsARequirementsErrorNamingIt) {
  const auto environment = request("tinypkg==1.0\nnosuchpkg\n");
  const Error error = failure(environment);
  EXPECT_EQ(error.code(), ExitCode::requirements) << error.what();
  EXPECT_NE(std::string(error.what()).find("no package 'nosuchpkg' on the package index"), std::string::npos)
      << error.what();
  EXPECT_FALSE(command::is_complete(environment_of(environment)));
}

TEST_F(PythonEnvironment, APackageThatDoesNotBuildIsARequirementsErrorNamingIt) {
  const Error error = failure(request("brokenpkg\n"));
  EXPECT_EQ(error.code(), ExitCode::requirements) << error.what();
  EXPECT_NE(std::string(error.what()).find("package 'brokenpkg' does not build here"), std::string::npos)
      << error.what();
}

TEST_F(PythonEnvironment, ATorchPinDirectOrTransitiveIsRefusedBeforeAnythingIsInstalled) {
  const std::string image_torch = command::probe_interpreter(kPython).torch_version;
  ASSERT_FALSE(image_torch.empty()) << "Debian's python3-torch is not installed for " << kPython;

  // An exact pin is refused from the file itself, before pip runs (offline too).
  const Error direct = failure(request("tinypkg==1.0\n torch == 9.9.9  # as in the old notebook\n"));
  EXPECT_EQ(direct.code(), ExitCode::requirements) << direct.what();
  const std::string message = direct.what();
  EXPECT_NE(message.find("refused before installing anything: it would replace the image's torch " + image_torch +
                         " (requirements.txt:2 pins torch == 9.9.9"), std::string::npos) << message;
  EXPECT_NE(message.find("share one LibTorch and NCCL"), std::string::npos) << message;
  EXPECT_EQ(index.requests("/simple/"), 0) << "pip ran";

  // Another specifier: pip resolves with the image's torch as a constraint and fails before installing.
  const auto ranged = request("tinypkg==1.0\ntorch>=9\n");
  const Error range = failure(ranged);
  EXPECT_EQ(range.code(), ExitCode::requirements) << range.what();
  EXPECT_NE(std::string(range.what()).find("The user requested torch>=9"), std::string::npos) << range.what();
  EXPECT_EQ(index.requests("torch-9.9.9"), 0) << "the other torch was downloaded";
  // Nothing was installed: tinypkg, which resolved fine, is not there either.
  const fs::path python = environment_of(ranged) / "bin" / "python3";
  EXPECT_NE(run_command(shell_quote(python.string()) + " -c 'import tinypkg'").exit_code, 0);

  const Error transitive = failure(request("hungry\n"));
  EXPECT_EQ(transitive.code(), ExitCode::requirements) << transitive.what();
  EXPECT_NE(std::string(transitive.what()).find("hungry 1.0 depends on torch>=9"), std::string::npos)
      << transitive.what();
}

// The gpu image's PyTorch lives in a virtual environment (/opt/venv): an environment built over its
// interpreter must see that environment's packages, after its own.
TEST_F(PythonEnvironment, AnEnvironmentOverAVirtualEnvironmentSeesItsPackagesAfterItsOwn) {
  const fs::path parent = dir / "opt-venv";
  testing::run_checked(kPython.string() + " -m venv --without-pip " + shell_quote(parent.string()));
  const command::Interpreter base = command::probe_interpreter(parent / "bin" / "python3");
  ASSERT_EQ(base.venv_site_packages.size(), 1u);
  testing::write_text(base.venv_site_packages[0] / "parentpkg.py", "WHERE = 'parent'\n");
  testing::write_text(base.venv_site_packages[0] / "tinypkg.py", "VALUE = 0\n");  // shadowed by the installed one

  const command::Environment environment =
      command::prepare_environment(request("tinypkg==1.0\n", parent / "bin" / "python3"));
  EXPECT_FALSE(environment.reused);
  const auto result = run_command(shell_quote((environment.root / "bin" / "python3").string()) +
                                  " -c 'import parentpkg, tinypkg; print(parentpkg.WHERE, tinypkg.VALUE)'");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "parent 7\n");
}

// A virtual environment made without --system-site-packages (the torch wheel's venv) does not see Debian's
// packages, and neither may an environment built over it: Debian's torchvision, built for Debian's torch,
// would otherwise satisfy a requirement and crash beside the venv's torch.
TEST_F(PythonEnvironment, AnEnvironmentOverAVirtualEnvironmentSeesNoSystemPackagesWhenItDoesNot) {
  const fs::path parent = dir / "isolated-venv";
  testing::run_checked(kPython.string() + " -m venv --without-pip " + shell_quote(parent.string()));
  ASSERT_EQ(run_command(kPython.string() + " -c 'import torch'").exit_code, 0) << "Debian's python3-torch";
  const command::Interpreter base = command::probe_interpreter(parent / "bin" / "python3");
  EXPECT_FALSE(base.sees_system_site_packages);
  EXPECT_TRUE(command::probe_interpreter(kPython).sees_system_site_packages);

  const command::Environment environment =
      command::prepare_environment(request("tinypkg==1.0\n", parent / "bin" / "python3"));
  const auto result = run_command(shell_quote((environment.root / "bin" / "python3").string()) +
                                  " -c 'import tinypkg; print(tinypkg.VALUE); import torch' 2>&1");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("7\n"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("No module named 'torch'"), std::string::npos) << result.output;
  // Two virtual environments resolve to the same interpreter; each has its own environment.
  EXPECT_NE(environment.root, command::environment_path(dir / "cache", command::probe_interpreter(kPython),
                                                        "tinypkg==1.0\n"));
}

TEST_F(PythonEnvironment, AnEditableInstallIsASpecErrorNamingItsLine) {
  testing::write_text(dir / "requirements.txt", "tinypkg\n  -e .\n");
  try {
    command::read_requirements(dir / "requirements.txt", "requirements.txt");
    FAIL() << "an editable install was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::spec);
    EXPECT_NE(std::string(error.what()).find("requirements.txt:2: '-e .'"), std::string::npos) << error.what();
  }
}

TEST_F(PythonEnvironment, IndexCredentialsStayOutOfMessagesAndPipsLog) {
  EXPECT_EQ(command::redact_urls("from 'https://me:t0k3n@pypi.example.org/simple/x/', http://a:b@h:1/s and ftp://h/p"),
            "from 'https://me:***@pypi.example.org/simple/x/', http://a:***@h:1/s and ftp://h/p");
  auto environment = request("nosuchpkg\n");
  const std::string secret = "s3cr3t-t0ken";
  environment.environment["PIP_INDEX_URL"] = "http://trainer:" + secret + "@" + index.url().substr(7);
  const Error error = failure(environment);
  EXPECT_EQ(std::string(error.what()).find(secret), std::string::npos) << error.what();
  const std::string log = read_file(environment_of(environment) / "trainpoint-pip.log", ExitCode::internal);
  EXPECT_NE(log.find("nosuchpkg"), std::string::npos) << log;
  EXPECT_EQ(log.find(secret), std::string::npos) << log;
}

}  // namespace
}  // namespace tp
