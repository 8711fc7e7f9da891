// One libcurl multi handle driven by one thread: an event loop under the
// HTTP(S)/S3 store (http_store.h), which runs one or more of them. Callers
// prepare an easy handle, Start() a Transfer and wait on it; the loop runs
// every transfer at once over a shared pool of keep-alive connections (the
// multi handle's connection cache), and Abort() / AbortAll() end transfers
// promptly (curl_multi_wakeup breaks the loop's poll).
//
// Contracts:
//  - Thread-safe: Start, Abort, AbortAll, Unpause, AcquireEasy and
//    ReleaseEasy may be called from any thread.
//  - A started transfer completes exactly once: the loop sets `done` under
//    `waiter->mu` and notifies `waiter->cv`. After that the loop never touches
//    the transfer or its easy handle again, so the caller may release them.
//  - The body callback runs on the loop thread; it must not block.
#pragma once

#include <curl/curl.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "sluice/result.h"

namespace sluice::runtime::remote {

// What a waiting caller blocks on; one per call (shared by its transfers).
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
};

class CurlEngine;

struct Transfer {
  // Set by the caller before Start(). `engine` is for the caller's own
  // bookkeeping (which engine it started the transfer on); the engine does
  // not read it.
  CURL* easy = nullptr;
  CurlEngine* engine = nullptr;
  Waiter* waiter = nullptr;
  // Completion, written by the loop under waiter->mu.
  bool done = false;
  bool aborted = false;  // ended by Abort/AbortAll, not by curl
  CURLcode code = CURLE_OK;
  long http_status = 0;
};

class CurlEngine {
 public:
  // max_connections: idle keep-alive connections kept (CURLMOPT_MAXCONNECTS).
  static Result<std::unique_ptr<CurlEngine>> Create(int max_connections);
  ~CurlEngine();  // aborts every transfer, joins the loop

  CurlEngine(const CurlEngine&) = delete;
  CurlEngine& operator=(const CurlEngine&) = delete;

  // A reset easy handle from the pool (or a new one); nullptr if curl fails.
  CURL* AcquireEasy();
  void ReleaseEasy(CURL* easy);

  // Hands `t` (easy options set, private pointer set to anything) to the loop.
  void Start(Transfer* t);
  // Ends `t` if it is still running (it completes with aborted = true).
  void Abort(Transfer* t);
  // Ends every running transfer.
  void AbortAll();
  // Resumes a transfer whose body callback returned CURL_WRITEFUNC_PAUSE.
  void Unpause(Transfer* t);

 private:
  enum class Op { kStart, kAbort, kAbortAll, kUnpause };
  struct Command {
    Op op;
    Transfer* transfer;
  };

  CurlEngine() = default;
  void Post(Op op, Transfer* t);
  void Loop();
  void RunCommands();
  void Complete(Transfer* t, CURLcode code, bool aborted);

  CURLM* multi_ = nullptr;
  std::thread thread_;
  std::mutex mu_;  // guards commands_, stop_ and easy_pool_
  std::deque<Command> commands_;
  std::vector<CURL*> easy_pool_;
  bool stop_ = false;
  std::unordered_set<Transfer*> active_;  // loop thread only
};

}  // namespace sluice::runtime::remote
