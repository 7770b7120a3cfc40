#include "storage/postgres/pg_spec.h"

#include <libpq-fe.h>

namespace kvc::storage {
namespace {

// Whether `word` is written as a keyword in `conninfo` ("word=", spaces allowed before '=').
bool UsedAsKeyword(const std::string& conninfo, std::string_view word) {
  for (size_t at = conninfo.find(word); at != std::string::npos; at = conninfo.find(word, at + 1)) {
    size_t after = at + word.size();
    while (after < conninfo.size() && conninfo[after] == ' ') ++after;
    const bool starts =
        at == 0 || conninfo[at - 1] == ' ' || conninfo[at - 1] == '?' || conninfo[at - 1] == '&';
    if (starts && after < conninfo.size() && conninfo[after] == '=') return true;
  }
  return false;
}

// libpq's message with every "quoted" part that is not a keyword of `conninfo` replaced.
std::string Scrub(std::string message, const std::string& conninfo) {
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
    message.pop_back();
  }
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    const size_t open = message.find('"', i);
    const size_t close = open == std::string::npos ? open : message.find('"', open + 1);
    if (close == std::string::npos) {
      out.append(message, i, std::string::npos);
      break;
    }
    const std::string_view quoted(message.data() + open + 1, close - open - 1);
    out.append(message, i, open - i + 1);
    out.append(UsedAsKeyword(conninfo, quoted) ? std::string(quoted) : std::string("..."));
    out.push_back('"');
    i = close + 1;
  }
  return out;
}

}  // namespace

Status CheckConninfo(const std::string& conninfo, std::string_view what) {
  if (conninfo.empty()) return InvalidArgument(std::string(what) + " is empty");
  if (conninfo.find('\0') != std::string::npos) {
    return InvalidArgument(std::string(what) + " holds a NUL byte");
  }
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options != nullptr) {
    PQconninfoFree(options);
    return Status::Ok();
  }
  std::string why = error != nullptr ? Scrub(error, conninfo) : "out of memory";
  if (error != nullptr) PQfreemem(error);
  return InvalidArgument(std::string(what) + " does not parse: " + why);
}

}  // namespace kvc::storage
