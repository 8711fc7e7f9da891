// A loopback HTTP/1.1 server whose every answer the test scripts: for the
// misbehaviours serve.py does not play (a resumed response from another
// version of the object, validators left out, slow bodies counted by size).
// Each connection runs on its own thread, with keep-alive; every request is
// recorded.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sluice::runtime::remote::remote_testing {

struct ScriptedRequest {
  std::string method, target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

struct ScriptedReply {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Length is added
  std::string body;
  size_t send_bytes = std::string::npos;  // send this much of the body, then reset (RST)
  double delay_s = 0;                     // before the status line
};

class ScriptedServer {
 public:
  using Handler = std::function<ScriptedReply(const ScriptedRequest&)>;

  explicit ScriptedServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(listen_fd_, 64);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~ScriptedServer() {
    stop_ = true;
    accept_thread_.join();
    for (std::thread& t : connections_) t.join();
    ::close(listen_fd_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::vector<ScriptedRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  size_t count(const std::string& method) const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<size_t>(std::count_if(requests_.begin(), requests_.end(),
                                             [&](const auto& r) { return r.method == method; }));
  }
  uint64_t body_bytes_sent() const { return body_bytes_.load(); }

 private:
  static bool Readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 50) > 0;
  }

  void AcceptLoop() {
    while (!stop_) {
      if (!Readable(listen_fd_)) continue;
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd >= 0) connections_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  // Reads one request's head; false when the peer closed or the server stops.
  bool ReadRequest(int fd, std::string& pending, ScriptedRequest& req) {
    size_t end;
    while ((end = pending.find("\r\n\r\n")) == std::string::npos) {
      if (stop_) return false;
      if (!Readable(fd)) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      pending.append(buf, static_cast<size_t>(n));
    }
    const std::string head = pending.substr(0, end);
    pending.erase(0, end + 4);
    size_t line_end = head.find("\r\n");
    const std::string first = head.substr(0, line_end);
    req.method = first.substr(0, first.find(' '));
    req.target = first.substr(first.find(' ') + 1, first.rfind(' ') - first.find(' ') - 1);
    while (line_end != std::string::npos) {
      const size_t next = head.find("\r\n", line_end + 2);
      const std::string line = head.substr(line_end + 2, next - line_end - 2);
      line_end = next;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      req.headers[name] = value;
    }
    return true;
  }

  static bool SendAll(int fd, const char* p, size_t n) {
    while (n > 0) {
      const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
      if (k <= 0) return false;
      p += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }

  void Serve(int fd) {
    std::string pending;
    ScriptedRequest req;
    while (ReadRequest(fd, pending, req)) {
      ScriptedReply reply;
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(req);
      }
      reply = handler_(req);
      if (reply.delay_s > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(reply.delay_s));
      }
      std::string head = "HTTP/1.1 " + std::to_string(reply.status) + " X\r\n";
      for (const auto& [name, value] : reply.headers) head += name + ": " + value + "\r\n";
      head += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n\r\n";
      const bool body = req.method != "HEAD";
      const size_t n = body ? std::min(reply.send_bytes, reply.body.size()) : 0;
      if (!SendAll(fd, head.data(), head.size()) || !SendAll(fd, reply.body.data(), n)) break;
      body_bytes_ += n;
      if (body && n < reply.body.size()) {
        linger l{1, 0};  // close with a TCP RST
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        break;
      }
      req = {};
    }
    ::close(fd);
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  std::vector<std::thread> connections_;  // accept thread only, then the destructor
  mutable std::mutex mu_;
  std::vector<ScriptedRequest> requests_;
  std::atomic<uint64_t> body_bytes_{0};
};

}  // namespace sluice::runtime::remote::remote_testing
