// `kvconnect serve`: options, flag registration and the run loop.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/engine.h"
#include "net/server.h"
#include "service/kv_service.h"
#include "storage/sqlite/sqlite_backend.h"

namespace kvc::cli {

struct ServeConfig {
  std::string addr = "127.0.0.1:4512";
  std::string data_dir = "./kvconnect-data";
  std::string sqlite_path;  // empty: <data_dir>/default.sqlite3
  std::string access_token;
  std::string sync = "full";  // full | normal | off
  std::string log_level = "info";
  int shutdown_grace_ms = 10000;
  net::ServerOptions net;
  engine::EngineOptions engine;
  service::ServiceOptions service;
};

void AddServeCommand(CLI::App& app, ServeConfig* config);
// Runs the server until SIGINT/SIGTERM. Returns the process exit code.
int RunServe(ServeConfig config);

}  // namespace kvc::cli
