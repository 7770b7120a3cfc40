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
  return "host=127.0.0.1 port=" + std::to_string(server->port()) + " user=" + PgServer::kUser +
         " dbname=" + name;
}

void DropPgDatabase(const std::string& conninfo) {
  auto& server = Shared();
  const size_t at = conninfo.rfind("dbname=");
  if (!server || at == std::string::npos) return;
  (void)server->Exec("drop database if exists " + conninfo.substr(at + 7) + " with (force)");
}

}  // namespace kvc::testutil
