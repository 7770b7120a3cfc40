#include "common/thread_name.h"

#include <pthread.h>

#include <array>

namespace kvc {

namespace {
constexpr size_t kMaxNameBytes = 15;  // the kernel's TASK_COMM_LEN (16) less the terminator
}  // namespace

void NameThisThread(std::string_view name) {
  const std::string cut(name.substr(0, kMaxNameBytes));
  (void)pthread_setname_np(pthread_self(), cut.c_str());
}

std::string ThisThreadName() {
  std::array<char, kMaxNameBytes + 1> buf{};
  if (pthread_getname_np(pthread_self(), buf.data(), buf.size()) != 0) return "";
  return std::string(buf.data());
}

}  // namespace kvc
