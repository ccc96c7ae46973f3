// A memcached server for one test: started on 127.0.0.1 on a free port, with
// -M (refuse rather than evict, as every node of the peer cache runs it),
// waited for with a bounded loop, and stopped by its own PID.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace l3::test {

// A TCP port nobody listens on now (the kernel's pick for port 0).
inline std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("bind");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

inline bool accepts(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

class Memcached {
public:
  // memory_mb: -m; item_mb: -I (the item size limit).
  explicit Memcached(unsigned memory_mb = 64, unsigned item_mb = 1) {
    for (int attempt = 0; attempt < 5 && pid_ <= 0; ++attempt) start(memory_mb, item_mb);
    if (pid_ <= 0) throw std::runtime_error("memcached did not start (is Debian's memcached installed?)");
  }
  ~Memcached() { stop(); }
  Memcached(const Memcached&) = delete;
  Memcached& operator=(const Memcached&) = delete;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::uint16_t port() const { return port_; }
  // SIGKILL, then reaped: the server is gone (connections refused).
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  void pause() { ::kill(pid_, SIGSTOP); }   // alive but silent: requests time out
  void resume() { ::kill(pid_, SIGCONT); }

private:
  void start(unsigned memory_mb, unsigned item_mb) {
    port_ = free_port();
    const std::string port = std::to_string(port_), mem = std::to_string(memory_mb),
                      item = std::to_string(item_mb) + "m";
    std::vector<std::string> args{"memcached", "-l", "127.0.0.1", "-p", port, "-U", "0", "-M", "-m", mem,
                                  "-I", item, "-t", "1"};
    if (::geteuid() == 0) args.insert(args.end(), {"-u", "root"});  // memcached refuses root otherwise
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork");
    if (pid == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      const int null = ::open("/dev/null", O_WRONLY);  // quiet: it logs the start-up probe's connection
      if (null >= 0) {
        ::dup2(null, 1);
        ::dup2(null, 2);
      }
      ::execvp("memcached", argv.data());
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) return;  // exited (port taken meanwhile, or no memcached)
      if (accepts(port_)) {
        pid_ = pid;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }

  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace l3::test
