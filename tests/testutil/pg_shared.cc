#include "testutil/pg_shared.h"

#include <memory>

#include "common/random.h"
#include "testutil/pg_server.h"

namespace kvc::testutil {
namespace {

std::unique_ptr<PgServer>& Shared() {
  static std::unique_ptr<PgServer> server;
  return server;
}

}  // namespace

Result<std::string> FreshPgDatabase() {
  auto& server = Shared();
  if (!server) {
    PgServerOptions o;
    o.fsync = false;
    o.settings = {"max_connections=300"};
    KVC_ASSIGN_OR_RETURN(server, PgServer::Start(o));
  }
  const std::string name = "kvc_" + HexEncode(RandomBytes(6));
  KVC_RETURN_IF_ERROR(server->Exec("create database " + name));
  return server->conninfo_for(name);
}

void DropPgDatabase(const std::string& conninfo) {
  auto& server = Shared();
  const size_t at = conninfo.rfind("dbname=");
  if (!server || at == std::string::npos) return;
  std::string name = conninfo.substr(at + 7);  // 'kvc_...' (conninfo_for quotes it)
  if (name.size() >= 2 && name.front() == '\'' && name.back() == '\'') {
    name = name.substr(1, name.size() - 2);
  }
  (void)server->Exec("drop database if exists " + name + " with (force)");
}

}  // namespace kvc::testutil
