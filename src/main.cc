// kvconnect: a self-hosted KV Connect server. Composition root: parses the command line and
// hands over to the subcommand in src/cli/.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/admin.h"
#include "cli/serve.h"

int main(int argc, char** argv) {
  CLI::App app{"kvconnect: a self-hosted Deno KV server speaking the KV Connect protocol"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvconnect 0.1.0");
  kvc::cli::ServeConfig serve;
  CLI::App* serve_cmd = kvc::cli::AddServeCommand(app, &serve);
  kvc::cli::AdminConfig admin;
  kvc::cli::AddAdminCommands(app, &admin);
  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand("serve")) {
    kvc::Status s = kvc::cli::ApplyServeConfigFile(serve_cmd, serve);
    if (!s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      return 2;
    }
    return kvc::cli::RunServe(serve);
  }
  return kvc::cli::RunAdmin(app, admin);
}
