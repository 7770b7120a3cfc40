#include "cli/queue.h"

#include <cstdlib>
#include <iostream>

#include "client/blocking_client.h"
#include "codec/json_text.h"
#include "service/query.h"

namespace kvc::cli {
namespace {

struct Call {
  std::string method;
  std::string what;  // after /admin/v1/databases/<db>/
  std::string body;
};

int Run(const QueueCliConfig& c, const Call& call) {
  std::string token = c.token;
  if (token.empty()) {
    if (const char* e = std::getenv("KVCONNECT_ACCESS_TOKEN"); e != nullptr) token = e;
  }
  if (token.empty()) {
    std::cerr << "error: an admin token is needed: --token TOKEN or the environment variable "
                 "KVCONNECT_ACCESS_TOKEN\n";
    return 2;
  }
  auto url = client::ParseUrl(c.url);
  if (!url.ok()) {
    std::cerr << "error: --url: " << url.status().message() << "\n";
    return 2;
  }
  std::string base = url->path;
  while (!base.empty() && base.back() == '/') base.pop_back();
  client::BlockingClientOptions o;
  o.origin = *url;
  o.ca_file = c.ca_file;
  auto http = client::BlockingClient::Connect(o);
  if (!http.ok()) {
    std::cerr << "error: " << http.status().message() << "\n";
    return 1;
  }
  client::Request r;
  r.method = call.method;
  r.path = base + "/admin/v1/databases/" + service::EncodeQueryValue(c.db) + "/" + call.what;
  r.headers = std::make_shared<const client::Headers>(
      client::Headers{{"authorization", "Bearer " + token}});
  if (call.method == "POST") r.extra_headers.emplace_back("content-type", "application/json");
  r.body = call.body;
  auto answer = (*http)->Call(std::move(r), std::chrono::milliseconds(60000));
  if (!answer.ok()) {
    std::cerr << "error: " << answer.status().message() << "\n";
    return 1;
  }
  if (answer->status != 200) {
    std::cerr << "error: the server answered HTTP " << answer->status << ": " << answer->body
              << "\n";
    return 1;
  }
  std::cout << answer->body << "\n";
  return 0;
}

std::string IdsBody(const QueueCliConfig& c) {
  if (c.all) return "{\"all\":true}";
  std::string out = "{\"ids\":[";
  for (size_t i = 0; i < c.ids.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += codec::JsonQuote(c.ids[i]);
  }
  return out + "]}";
}

}  // namespace

void AddQueueCommands(CLI::App& app, QueueCliConfig* c) {
  CLI::App* q = app.add_subcommand(
      "queue", "A running server's queue: counts and dead letters (through its admin API)");
  q->require_subcommand(1);
  auto common = [c](CLI::App* s) {
    s->add_option("--url", c->url, "The server")->capture_default_str();
    s->add_option("--token", c->token,
                  "An admin access token (default: env KVCONNECT_ACCESS_TOKEN)");
    s->add_option("--db", c->db, "The database")->capture_default_str();
    s->add_option("--ca-file", c->ca_file, "With an https --url: a CA certificate to trust");
  };
  common(q->add_subcommand("stats", "Ready, delayed, leased and dead messages"));
  CLI::App* dead = q->add_subcommand("dead", "Dead letters: list, requeue, purge");
  dead->require_subcommand(1);
  CLI::App* list = dead->add_subcommand("list", "List dead letters (JSON, in id order)");
  common(list);
  list->add_option("--limit", c->limit, "At most this many")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  list->add_option("--cursor", c->cursor, "The cursor of the previous page");
  for (const char* name : {"requeue", "purge"}) {
    CLI::App* s = dead->add_subcommand(name, std::string(name) == "requeue"
                                                 ? "Deliver dead letters again (due now)"
                                                 : "Delete dead letters for good");
    common(s);
    auto* ids = s->add_option("--id", c->ids, "A dead letter's id (repeatable)");
    auto* all = s->add_flag("--all", c->all, "Every dead letter");
    ids->excludes(all);
    all->excludes(ids);
  }
}

int RunQueue(CLI::App& app, const QueueCliConfig& c) {
  CLI::App* q = app.get_subcommand("queue");
  if (q->got_subcommand("stats")) return Run(c, Call{"GET", "queue", ""});
  CLI::App* dead = q->get_subcommand("dead");
  if (dead->got_subcommand("list")) {
    std::string body = "{\"limit\":" + std::to_string(c.limit);
    if (!c.cursor.empty()) body += ",\"cursor\":" + codec::JsonQuote(c.cursor);
    return Run(c, Call{"POST", "queue/dead/list", body + "}"});
  }
  const bool requeue = dead->got_subcommand("requeue");
  if (!c.all && c.ids.empty()) {
    std::cerr << "error: name the dead letters with --id, or give --all\n";
    return 2;
  }
  return Run(c, Call{"POST", requeue ? "queue/dead/requeue" : "queue/dead/purge", IdsBody(c)});
}

}  // namespace kvc::cli
