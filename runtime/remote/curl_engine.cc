#include "runtime/remote/curl_engine.h"

#include <mutex>

namespace sluice::runtime::remote {
namespace {

// curl_global_init once per process (not thread-safe on its own).
bool GlobalInit() {
  static const bool ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  return ok;
}

}  // namespace

Result<std::unique_ptr<CurlEngine>> CurlEngine::Create(int max_connections) {
  if (!GlobalInit()) return MakeError(ErrorCode::kIo, "libcurl failed to initialise");
  std::unique_ptr<CurlEngine> engine(new CurlEngine());
  engine->multi_ = curl_multi_init();
  if (engine->multi_ == nullptr) return MakeError(ErrorCode::kIo, "curl_multi_init failed");
  curl_multi_setopt(engine->multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(max_connections));
  engine->thread_ = std::thread([e = engine.get()] { e->Loop(); });
  return engine;
}

CurlEngine::~CurlEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    commands_.push_back({Op::kAbortAll, nullptr});
  }
  curl_multi_wakeup(multi_);
  if (thread_.joinable()) thread_.join();
  for (CURL* easy : easy_pool_) curl_easy_cleanup(easy);
  curl_multi_cleanup(multi_);
}

CURL* CurlEngine::AcquireEasy() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!easy_pool_.empty()) {
      CURL* easy = easy_pool_.back();
      easy_pool_.pop_back();
      return easy;
    }
  }
  return curl_easy_init();
}

void CurlEngine::ReleaseEasy(CURL* easy) {
  if (easy == nullptr) return;
  curl_easy_reset(easy);  // options only: the connection cache is the multi's
  std::lock_guard<std::mutex> lock(mu_);
  easy_pool_.push_back(easy);
}

void CurlEngine::Post(Op op, Transfer* t) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back({op, t});
  }
  curl_multi_wakeup(multi_);
}

void CurlEngine::Start(Transfer* t) { Post(Op::kStart, t); }
void CurlEngine::Abort(Transfer* t) { Post(Op::kAbort, t); }
void CurlEngine::AbortAll() { Post(Op::kAbortAll, nullptr); }
void CurlEngine::Unpause(Transfer* t) { Post(Op::kUnpause, t); }

void CurlEngine::Complete(Transfer* t, CURLcode code, bool aborted) {
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  curl_multi_remove_handle(multi_, t->easy);
  active_.erase(t);
  std::lock_guard<std::mutex> lock(t->waiter->mu);
  t->code = code;
  t->aborted = aborted;
  t->http_status = status;
  t->done = true;
  t->waiter->cv.notify_all();
}

void CurlEngine::RunCommands() {
  std::deque<Command> commands;
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands.swap(commands_);
  }
  for (const Command& c : commands) {
    switch (c.op) {
      case Op::kStart:
        if (curl_multi_add_handle(multi_, c.transfer->easy) == CURLM_OK) {
          active_.insert(c.transfer);
        } else {
          active_.insert(c.transfer);
          Complete(c.transfer, CURLE_FAILED_INIT, false);
        }
        break;
      case Op::kAbort:
        if (active_.count(c.transfer)) Complete(c.transfer, CURLE_ABORTED_BY_CALLBACK, true);
        break;
      case Op::kAbortAll: {
        std::vector<Transfer*> all(active_.begin(), active_.end());
        for (Transfer* t : all) Complete(t, CURLE_ABORTED_BY_CALLBACK, true);
        break;
      }
      case Op::kUnpause:
        if (active_.count(c.transfer)) curl_easy_pause(c.transfer->easy, CURLPAUSE_CONT);
        break;
    }
  }
}

void CurlEngine::Loop() {
  for (;;) {
    RunCommands();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_ && commands_.empty()) break;
    }
    int running = 0;
    curl_multi_perform(multi_, &running);
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
      if (t != nullptr && active_.count(t)) Complete(t, msg->data.result, false);
    }
    curl_multi_poll(multi_, nullptr, 0, 1000, nullptr);
  }
}

}  // namespace sluice::runtime::remote
