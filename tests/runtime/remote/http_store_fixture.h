// The loopback fixture of the HTTP(S)/S3 store tests (http_*_test.cc):
// servers from tests/remote/fixtures/serve.py run as child processes (Python's
// http.server with ranges, moto's S3 with IAM authentication on, the
// fault-injecting proxy), a suite fixture that writes the served files and
// starts the plain HTTP server on first use, and RemoteOptions with short
// timeouts. A missing Python module (moto, boto3) skips, or fails under CI=true.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/remote/http_store.h"

namespace sluice::runtime::remote::remote_testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// A fixture server: `python3 serve.py ARGS...`, its JSON line, killed (and its
// stdin closed) on destruction; PR_SET_PDEATHSIG kills it with the test.
class ServerProcess {
 public:
  ~ServerProcess() {
    if (pid_ > 0) {
      close(stdin_fd_);
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Starts the server; false with *error on failure ("missing module ..."
  // when a Python module is not installed).
  bool Start(const std::vector<std::string>& args, std::string* error) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return Fail("pipe failed", error);
    std::vector<std::string> argv = {
        "/usr/bin/python3", std::string(SLUICE_SOURCE_DIR) + "/tests/remote/fixtures/serve.py"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      std::vector<char*> c;
      for (auto& a : argv) c.push_back(a.data());
      c.push_back(nullptr);
      execv(c[0], c.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_fd_ = in[1];
    std::string line;
    char ch;
    pollfd p{out[0], POLLIN, 0};
    while (line.find('\n') == std::string::npos && poll(&p, 1, 60000) > 0 &&
           read(out[0], &ch, 1) == 1) {
      line += ch;
    }
    close(out[0]);
    auto parsed = nlohmann::json::parse(line, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      return Fail("fixture printed no JSON line: '" + line + "'", error);
    }
    if (parsed.contains("error")) return Fail(parsed["error"].get<std::string>(), error);
    info = parsed;
    return true;
  }

  int port() const { return info["port"].get<int>(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }

  nlohmann::json info;

 private:
  static bool Fail(const std::string& message, std::string* error) {
    *error = message;
    return false;
  }
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
};

#define START_SERVER(server, ...)                                                \
  do {                                                                           \
    std::string start_error_;                                                    \
    if (!(server).Start({__VA_ARGS__}, &start_error_)) {                         \
      if (!InCi() && start_error_.find("missing module") != std::string::npos) { \
        GTEST_SKIP() << start_error_;                                            \
      }                                                                          \
      FAIL() << start_error_;                                                    \
    }                                                                            \
  } while (0)

// Sets environment variables for one scope, restoring them after.
class ScopedEnv {
 public:
  ~ScopedEnv() {
    for (auto& [name, old] : saved_) {
      if (old) {
        setenv(name.c_str(), old->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  void Set(const std::string& name, const char* value) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) {
      setenv(name.c_str(), value, 1);
    } else {
      unsetenv(name.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

inline std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

inline void WriteFile(const fs::path& path, const std::vector<uint8_t>& data) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

constexpr int kListed = 23;
constexpr size_t kBlobSize = (3 << 20) + 12345;
constexpr size_t kBigSize = (20 << 20) + 777;  // more than a stream's queue (8 MiB)

// Streams `url` through `store`, appending every byte to `out`.
inline Status StreamInto(ObjectStore& store, const std::string& url, std::vector<uint8_t>& out) {
  return store.Stream(url, [&](const uint8_t* p, size_t n) {
    out.insert(out.end(), p, p + n);
    return Ok();
  });
}

class HttpStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() /
                         ("sluice_http_store_test_" + std::to_string(getpid())));
    fs::create_directories(*root_);
    blob_ = new std::vector<uint8_t>(RandomBytes(kBlobSize, 7));
    // HTTP serves root_; S3 gets root_/s3 (without the big file, to keep
    // moto's uploads short).
    for (const fs::path& dir : {*root_, *root_ / "s3"}) {
      WriteFile(dir / "data" / "blob.bin", *blob_);
      for (int i = 0; i < kListed; ++i) {
        char name[32];
        std::snprintf(name, sizeof(name), "k-%03d", i);
        WriteFile(dir / "many" / name, RandomBytes(10 + i, i));
      }
    }
    big_ = new std::vector<uint8_t>(RandomBytes(kBigSize, 8));
    WriteFile(*root_ / "data" / "big.bin", *big_);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
    delete blob_;
    delete big_;
  }

  // The suite's servers, started on first use.
  ServerProcess& Http() {
    if (!http_) {
      http_ = std::make_unique<ServerProcess>();
      std::string error;
      if (!http_->Start({"http", "--root", root_->string()}, &error)) {
        http_.reset();
        ADD_FAILURE() << error;
      }
    }
    return *http_;
  }

  // A fault proxy (serve.py proxy) in front of the suite's HTTP server, with
  // `args` (--fault KIND:EVERY:PHASE ..., --delay-s S); it lives until the
  // test ends. Null, with the failure added, when it cannot start.
  ServerProcess* ProxyToHttp(const std::vector<std::string>& args) {
    ServerProcess& http = Http();
    if (HasFailure()) return nullptr;
    std::vector<std::string> argv = {"proxy", "--upstream", std::to_string(http.port())};
    argv.insert(argv.end(), args.begin(), args.end());
    auto proxy = std::make_unique<ServerProcess>();
    std::string error;
    if (!proxy->Start(argv, &error)) {
      ADD_FAILURE() << "fault proxy: " << error;
      return nullptr;
    }
    proxies_.push_back(std::move(proxy));
    return proxies_.back().get();
  }

  static RemoteOptions Fast() {
    RemoteOptions o;
    o.deadline_s = 20;
    o.connect_timeout_s = 5;
    o.backoff_initial_s = 0.005;
    o.backoff_max_s = 0.05;
    o.max_retries = 8;
    o.hedge_delay_s = 0;
    return o;
  }

  static std::shared_ptr<ObjectStore> Open(const std::string& url, const RemoteOptions& o,
                                           HttpStoreTuning tuning = {}) {
    auto store = OpenHttpStore(url, o, tuning);
    EXPECT_TRUE(store) << store.error().ToString();
    return store ? *store : nullptr;
  }

  // Reads a few ranges and the whole object through `store`; all must match.
  static void ExpectSameBytes(ObjectStore& store, const std::string& url) {
    const std::vector<uint8_t>& blob = *blob_;
    auto info = store.Stat(url);
    ASSERT_TRUE(info) << info.error().ToString();
    EXPECT_EQ(info->size, blob.size());
    const std::pair<uint64_t, uint64_t> ranges[] = {
        {0, 1}, {1, 100}, {4096, 65536}, {blob.size() - 10, 10}, {123457, 1 << 20}};
    for (auto [offset, length] : ranges) {
      std::vector<uint8_t> got(length);
      auto st = store.ReadRange(url, offset, length, got.data());
      ASSERT_TRUE(st) << st.error().ToString();
      EXPECT_TRUE(std::equal(got.begin(), got.end(), blob.begin() + offset))
          << "range " << offset << "+" << length;
    }
    std::vector<uint8_t> streamed;
    auto st = StreamInto(store, url, streamed);
    ASSERT_TRUE(st) << st.error().ToString();
    EXPECT_TRUE(streamed == blob) << "streamed " << streamed.size() << " bytes";
  }

  // An S3 store for the moto server at `endpoint`, with these credentials.
  std::shared_ptr<ObjectStore> OpenS3(ScopedEnv& env, const std::string& endpoint,
                                      const std::string& key, const std::string& secret,
                                      RemoteOptions o = Fast(), HttpStoreTuning tuning = {}) {
    env.Set("AWS_PROFILE", nullptr);
    env.Set("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent");
    env.Set("AWS_CONFIG_FILE", "/nonexistent");
    env.Set("AWS_ACCESS_KEY_ID", key.c_str());
    env.Set("AWS_SECRET_ACCESS_KEY", secret.c_str());
    env.Set("AWS_SESSION_TOKEN", nullptr);
    env.Set("AWS_REGION", "us-east-1");
    env.Set("AWS_ENDPOINT_URL", nullptr);
    env.Set("AWS_ENDPOINT_URL_S3", endpoint.c_str());
    return Open("s3://sluice-test/", o, tuning);
  }

  inline static fs::path* root_ = nullptr;
  inline static std::vector<uint8_t>* blob_ = nullptr;
  inline static std::vector<uint8_t>* big_ = nullptr;
  std::unique_ptr<ServerProcess> http_;
  std::vector<std::unique_ptr<ServerProcess>> proxies_;
};

}  // namespace sluice::runtime::remote::remote_testing
