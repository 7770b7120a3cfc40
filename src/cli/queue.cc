#include "cli/queue.h"

#include <cstdio>
#include <iostream>

#include "cli/admin.h"
#include "cli/admin_client.h"
#include "codec/admin_json.h"
#include "codec/json_text.h"
#include "common/clock.h"
#include "service/query.h"

namespace kvc::cli {
namespace {

struct Call {
  std::string method;
  std::string what;  // after /admin/v1/databases/<db>/
  std::string body;
};

// The answer to `call`, when the server said 200. Errors: the token's (ResolveToken),
// connecting, and the server's answer (AdminHttpError).
Result<std::string> Send(const QueueCliConfig& c, const Call& call) {
  AdminClient::Options o;
  o.url = c.url;
  KVC_ASSIGN_OR_RETURN(o.token, ResolveToken(c.token, c.url, c.data_dir));
  o.db = c.db;
  o.ca_file = c.ca_file;
  o.request_timeout = std::chrono::milliseconds(60000);
  KVC_ASSIGN_OR_RETURN(auto admin, AdminClient::Connect(o));
  KVC_ASSIGN_OR_RETURN(
      client::Response r,
      admin->Send(call.method, "databases/" + service::EncodeQueryValue(c.db) + "/" + call.what,
                  call.body));
  if (r.status != 200) return AdminHttpError(r.status, r.body);
  return std::move(r.body);
}

// Sends `call` and shows its answer: as the server wrote it with --json, else parsed by `parse`
// and printed by `show` (which returns the exit code). Returns the exit code.
template <typename Parse, typename Show>
int Answer(const QueueCliConfig& c, const Call& call, Parse parse, Show show) {
  auto body = Send(c, call);
  if (!body.ok()) return PrintError(body.status());
  if (c.json) {
    std::cout << *body << "\n";
    return 0;
  }
  auto parsed = parse(*body);
  if (!parsed.ok()) return PrintError(parsed.status());
  return show(*parsed);
}

// `text` cut to `width` characters (bytes; UTF-8 is cut at a character boundary) with "...".
std::string Cut(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  size_t end = width - 3;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end) + "...";
}

int ShowCounts(const QueueCliConfig& c, const codec::QueueCountsAnswer& n) {
  std::printf("Queue of database '%s':\n", c.db.c_str());
  std::printf("  %-12s %s\n", "ready", Count(n.counts.ready, "message", "messages").c_str());
  std::printf("  %-12s %s\n", "delayed", Count(n.counts.delayed, "message", "messages").c_str());
  std::printf("  %-12s %s\n", "leased", Count(n.counts.leased, "message", "messages").c_str());
  std::printf("  %-12s %s\n", "dead", Count(n.counts.dead, "dead letter", "dead letters").c_str());
  if (n.counts.dead > 0) {
    std::printf("See them with `kvconnect queue dead list --db %s`.\n", c.db.c_str());
  }
  return 0;
}

int Stats(const QueueCliConfig& c) {
  return Answer(c, Call{"GET", "queue", ""}, codec::ParseQueueCountsAnswer,
                [&c](const codec::QueueCountsAnswer& n) { return ShowCounts(c, n); });
}

int ShowDeadList(const QueueCliConfig& c, const codec::QueueDeadListAnswer& page) {
  if (page.dead_letters.empty()) {
    std::printf("No dead letters in database '%s'.\n", c.db.c_str());
    return 0;
  }
  const int64_t now = NowUnixMs();
  std::printf("%-36s %-40s %-8s %-32s %s\n", "ID", "DEAD SINCE", "ATTEMPTS", "LAST ERROR", "VALUE");
  for (const codec::QueueDeadLetterAnswer& d : page.dead_letters) {
    std::printf("%-36s %-40s %-8lld %-32s %s\n", d.id.c_str(), HumanTime(d.dead_at_ms, now).c_str(),
                static_cast<long long>(d.attempts),
                Cut(d.last_error.empty() ? "-" : d.last_error, 32).c_str(),
                Cut(d.value_json, 60).c_str());
  }
  std::printf(
      "%s.",
      Count(static_cast<int64_t>(page.dead_letters.size()), "dead letter", "dead letters").c_str());
  if (!page.cursor.empty()) {
    std::printf(" More: kvconnect queue dead list --db %s --cursor %s", c.db.c_str(),
                page.cursor.c_str());
  }
  std::printf("\n");
  return 0;
}

int DeadList(const QueueCliConfig& c) {
  std::string body = "{\"limit\":" + std::to_string(c.limit);
  if (!c.cursor.empty()) body += ",\"cursor\":" + codec::JsonQuote(c.cursor);
  return Answer(c, Call{"POST", "queue/dead/list", body + "}"}, codec::ParseQueueDeadListAnswer,
                [&c](const codec::QueueDeadListAnswer& page) { return ShowDeadList(c, page); });
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

int DeadChange(const QueueCliConfig& c, bool requeue) {
  if (!c.all && c.ids.empty()) {
    return PrintError(InvalidArgument("name the dead letters with --id, or give --all"));
  }
  return Answer(c, Call{"POST", requeue ? "queue/dead/requeue" : "queue/dead/purge", IdsBody(c)},
                codec::ParseQueueCountsAnswer, [requeue](const codec::QueueCountsAnswer& n) {
                  std::printf("%s %s%s.\n", requeue ? "Requeued" : "Purged",
                              Count(n.count, "dead letter", "dead letters").c_str(),
                              requeue ? " (due now)" : "");
                  return 0;
                });
}

}  // namespace

void AddQueueCommands(CLI::App& app, QueueCliConfig* c) {
  CLI::App* q = app.add_subcommand(
      "queue", "A running server's queue: counts and dead letters (through its admin API)");
  q->require_subcommand(1);
  auto common = [c](CLI::App* s) {
    AddUrlFlag(s, &c->url, "The server")->capture_default_str();
    AddTokenFlag(s, &c->token);
    AddDbFlag(s, &c->db);
    AddCaFileFlag(s, &c->ca_file);
    AddDataDirFlag(s, &c->data_dir,
                   "The server's data directory, for its access-token file when --url is on "
                   "this machine and no token is given");
    AddJsonFlag(s, &c->json);
  };
  common(q->add_subcommand("stats", "Ready, delayed, leased and dead messages"));
  CLI::App* dead = q->add_subcommand("dead", "Dead letters: list, requeue, purge");
  dead->require_subcommand(1);
  CLI::App* list = dead->add_subcommand("list", "List dead letters (in id order)");
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
  if (q->got_subcommand("stats")) return Stats(c);
  CLI::App* dead = q->get_subcommand("dead");
  if (dead->got_subcommand("list")) return DeadList(c);
  return DeadChange(c, dead->got_subcommand("requeue"));
}

}  // namespace kvc::cli
