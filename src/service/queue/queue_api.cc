#include "service/queue/queue_api.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <tuple>
#include <utility>
#include <vector>

#include "codec/admin_json.h"
#include "codec/json_text.h"
#include "codec/v8/v8_json.h"
#include "codec/v8/v8_portable.h"
#include "codec/versionstamp.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "engine/engine.h"
#include "queue/queue.h"
#include "service/guarded.h"
#include "service/query.h"

namespace kvc::service {
namespace {

HttpResponse Json(std::string body) { return JsonResponse(200, std::move(body)); }

// A delivery as the API shows it (docs/queues.md).
Result<std::string> DeliveryJson(const queue::Delivery& d, bool v8) {
  KVC_ASSIGN_OR_RETURN(std::string value, QueueValueOf(d.payload, v8));
  std::string out = "{\"id\":" + codec::JsonQuote(d.id) +
                    ",\"lease\":" + codec::JsonQuote(d.lease) + ",\"value\":" + value +
                    ",\"attempt\":" + std::to_string(d.attempt) +
                    ",\"lease_expires_at\":" + std::to_string(d.lease_expires_ms) + "}";
  return out;
}

// The Server-Sent Events of GET .../stream: one `message` event per delivery.
class QueueStream : public StreamSource,
                    public queue::ConsumerSink,
                    public std::enable_shared_from_this<QueueStream> {
 public:
  QueueStream(std::shared_ptr<queue::Queue> queue, queue::ConsumerOptions options, bool v8)
      : queue_(std::move(queue)), options_(options), v8_(v8) {}

  void Start(std::shared_ptr<StreamSink> sink) override {
    {
      MutexLock lock(mu_);
      if (cancelled_) return;
      sink_ = std::move(sink);
      sink_->Send(": consuming\n\n");  // the client sees the stream is open at once
    }
    auto sub = queue_->Subscribe(options_, shared_from_this());
    std::shared_ptr<StreamSink> close;
    {
      MutexLock lock(mu_);
      if (!sub.ok()) {
        // Refused (too many consumers, or the queue stopped): an error event, then the end.
        if (sink_) {
          sink_->Send("event: error\ndata: " +
                      codec::JsonQuote(std::string(sub.status().message())) + "\n\n");
          close = std::move(sink_);
        }
      } else if (!cancelled_) {
        subscription_ = std::move(*sub);
      }
    }
    if (close) close->Close();
  }

  void Cancel() override {
    std::unique_ptr<queue::Queue::Subscription> sub;
    {
      MutexLock lock(mu_);
      cancelled_ = true;
      sink_.reset();
      sub = std::move(subscription_);
    }
    sub.reset();  // outside mu_: the queue's lock comes first in Deliver
  }

  void Deliver(queue::Delivery d) override {
    auto json = DeliveryJson(d, v8_);
    if (!json.ok()) {
      // The lease expires and the message is delivered again (and finally dead-lettered).
      spdlog::error("queue stream: {}", json.status().ToString());
      return;
    }
    MutexLock lock(mu_);
    if (sink_) sink_->Send("event: message\ndata: " + *json + "\n\n");
  }

  void Closed(const Status& why) override {
    MutexLock lock(mu_);
    if (!sink_) return;
    sink_->Send("event: error\ndata: " + codec::JsonQuote(std::string(why.message())) + "\n\n");
    sink_->Close();
    sink_.reset();
  }

 private:
  const std::shared_ptr<queue::Queue> queue_;
  const queue::ConsumerOptions options_;
  const bool v8_;
  Mutex mu_;
  std::shared_ptr<StreamSink> sink_ KVC_GUARDED_BY(mu_);
  std::unique_ptr<queue::Queue::Subscription> subscription_ KVC_GUARDED_BY(mu_);
  bool cancelled_ KVC_GUARDED_BY(mu_) = false;
};

Result<int64_t> IntParam(const QueryParams& params, const char* name, int64_t fallback) {
  const std::string* v = FindParam(params, name);
  if (v == nullptr) return fallback;
  try {
    size_t used = 0;
    const int64_t n = std::stoll(*v, &used);
    if (used == v->size()) return n;
  } catch (...) {
  }
  return InvalidArgument("The query parameter '" + std::string(name) + "' must be an integer.");
}

}  // namespace

Result<std::string> QueueValueOf(const std::string& payload, bool v8) {
  std::optional<std::string> portable = codec::PortableV8(payload);
  return codec::QueueValueJson(portable ? *portable : payload, v8);
}

namespace {

// Runs `fn` (an engine callback); a throw (a bug) becomes a 500 instead of a lost response.
template <typename Fn>
void Guarded(const JsonCall& call, Fn&& fn) {
  RunGuarded("queue API handler", fn, [&](const Status& s) { call.Fail(s); });
}

// The guard of every queue endpoint: the database's queue runs (attached to the call).
Status QueueRunning(JsonCall& call) {
  std::shared_ptr<queue::Queue> q = queue::Queue::QueueFor(*call.db->engine);
  if (!q) return Unavailable("Queue delivery is not running for this database, try again later.");
  call.found = std::move(q);
  return Status::Ok();
}

// The queue QueueRunning attached. REQUIRES: the endpoint's guard is QueueRunning.
std::shared_ptr<queue::Queue> QueueOf(const JsonCall& call) {
  return std::static_pointer_cast<queue::Queue>(call.found);
}

JsonApiPolicy QueuePolicy(Authenticator* auth, Directory* directory, WorkPool* body_pool) {
  JsonApiPolicy p;
  p.auth = auth;
  p.directory = directory;
  if (body_pool != nullptr) {
    p.post = [body_pool](std::function<void()> work) { return body_pool->Post(std::move(work)); };
  }
  p.admit_database = [auth](const Principal& who, const Directory::Database& db,
                            const std::string& name) {
    KVC_RETURN_IF_ERROR(auth->AdmitToDatabase(who, db, name));
    if (who.scope == auth::Scope::kRead) {
      return PermissionDenied("This access token is read-only; the queue API is not permitted.");
    }
    return Status::Ok();
  };
  p.log_name = "queue API";
  return p;
}

void Pull(const JsonCallPtr& call, codec::QueuePullJson req) {
  queue::PullRequest pr;
  pr.max_messages = static_cast<size_t>(req.max_messages);
  pr.visibility_ms = req.visibility_ms;
  pr.wait_ms = req.wait_ms;
  pr.gone = call->req.client_gone;
  QueueOf(*call)->Pull(pr, [call, v8 = req.v8](Result<std::vector<queue::Delivery>> r) {
    Guarded(*call, [&] {
      if (!r.ok()) return call->Fail(r.status());
      std::string out = "{\"messages\":[";
      bool first = true;
      for (const queue::Delivery& d : *r) {
        auto json = DeliveryJson(d, v8);
        if (!json.ok()) {
          spdlog::error("queue pull: {}", json.status().ToString());
          continue;  // its lease expires; retried, then dead-lettered
        }
        if (!first) out.push_back(',');
        first = false;
        out += *json;
      }
      out += "]}";
      call->respond(Json(std::move(out)));
    });
  });
}

std::string SettleJson(const std::vector<queue::SettleResult>& results) {
  std::string out = "{\"results\":[";
  for (size_t i = 0; i < results.size(); ++i) {
    const queue::SettleResult& s = results[i];
    if (i > 0) out.push_back(',');
    out += "{\"lease\":" + codec::JsonQuote(s.lease) + ",\"status\":\"" +
           queue::SettleStatusName(s.status) + "\"";
    if (s.lease_expires_ms > 0) {
      out += ",\"lease_expires_at\":" + std::to_string(s.lease_expires_ms);
    }
    out.push_back('}');
  }
  out += "]}";
  return out;
}

void Settle(queue::SettleKind kind, const JsonCallPtr& call, codec::QueueSettleJson req) {
  queue::SettleRequest sr;
  sr.kind = kind;
  sr.leases = std::move(req.leases);
  sr.delay_ms = req.delay_ms;
  sr.error = std::move(req.error);
  sr.visibility_ms = req.visibility_ms;
  QueueOf(*call)->Settle(std::move(sr), [call](Result<std::vector<queue::SettleResult>> r) {
    Guarded(*call, [&] {
      if (!r.ok()) return call->Fail(r.status());
      call->respond(Json(SettleJson(*r)));
    });
  });
}

// The consumer options of GET .../stream from its query, checked against the queue's bounds.
Result<queue::ConsumerOptions> StreamOptions(const QueryParams& params, const queue::Queue& q) {
  KVC_ASSIGN_OR_RETURN(int64_t in_flight, IntParam(params, "max_in_flight", 10));
  KVC_ASSIGN_OR_RETURN(int64_t visibility, IntParam(params, "visibility_timeout", 0));
  if (in_flight < 1 || in_flight > static_cast<int64_t>(q.options().max_in_flight_per_consumer)) {
    return InvalidArgument("max_in_flight must be between 1 and " +
                           std::to_string(q.options().max_in_flight_per_consumer) + ".");
  }
  if (visibility != 0 &&
      (visibility < q.options().min_visibility_ms || visibility > q.options().max_visibility_ms)) {
    return InvalidArgument("visibility_timeout must be between " +
                           std::to_string(q.options().min_visibility_ms) + " and " +
                           std::to_string(q.options().max_visibility_ms) + " ms.");
  }
  queue::ConsumerOptions co;
  co.max_in_flight = static_cast<size_t>(in_flight);
  co.visibility_ms = visibility;
  return co;
}

}  // namespace

QueueApi::QueueApi(QueueApiOptions options, Directory* directory, Authenticator* auth,
                   WorkPool* body_pool)
    : options_(options), json_(QueuePolicy(auth, directory, body_pool)) {
  AddOperationRoutes(&routes_);
}

void QueueApi::Handle(HttpRequest request, Responder respond) {
  routes_.Handle(std::move(request), std::move(respond));
}

void QueueApi::AddOperationRoutes(Router* router) {
  const std::vector<std::string> bases = {kPath, kDatabasePath};
  auto add = [&](const char* name, const char* method, const char* op, JsonHandler handle) {
    std::vector<std::string> patterns;
    patterns.reserve(bases.size());
    for (const std::string& base : bases) patterns.push_back(base + "/" + op);
    json_.Add(router, {name,
                       {method},
                       std::move(patterns),
                       JsonNeeds::kDatabase,
                       QueueRunning,
                       std::move(handle),
                       std::string(method) == "GET" ? "GET." : "POST with a JSON body."});
  };
  using A = JsonApi;
  add("queue_enqueue", "POST", "enqueue", [this](const JsonCallPtr& c) { Enqueue(c); });
  add("queue_pull", "POST", "pull", A::WithBody(&codec::ParseQueuePullRequest, Pull));
  for (auto [name, op, kind] : {std::tuple{"queue_ack", "ack", queue::SettleKind::kAck},
                                std::tuple{"queue_nack", "nack", queue::SettleKind::kNack},
                                std::tuple{"queue_extend", "extend", queue::SettleKind::kExtend}}) {
    add(name, "POST", op,
        A::WithBody<codec::QueueSettleJson>(
            &codec::ParseQueueSettleRequest,
            [k = kind](const JsonCallPtr& c, codec::QueueSettleJson req) {
              Settle(k, c, std::move(req));
            }));
  }
  add("queue_stream", "GET", "stream", [this](const JsonCallPtr& c) { Stream(c); });
  // Another operation: 405 but for POST, which is 404, once the token and database are checked;
  // a deeper path: 404 at once.
  add("queue", "POST", "{op}", [](const JsonCallPtr& c) {
    c->Fail(NotFound("No queue API resource at " + c->req.path + "."));
  });
  for (const std::string& base : bases) {
    router->Add(Endpoint{
        "queue", {}, base + "/{path...}", [](const HttpRequest& req, const Responder& respond) {
          respond(JsonErrorResponse(NotFound("No queue API resource at " + req.path + ".")));
        }});
  }
}

void QueueApi::Stream(const JsonCallPtr& call) {
  auto params = ParseQuery(call->req.query);
  if (!params.ok()) return call->Fail(params.status());
  std::shared_ptr<queue::Queue> q = QueueOf(*call);
  auto co = StreamOptions(*params, *q);
  if (!co.ok()) return call->Fail(co.status());
  const std::string* format = FindParam(*params, "format");
  if (format != nullptr && *format != "json" && *format != "v8") {
    return call->Fail(InvalidArgument("format must be json or v8."));
  }
  HttpResponse r;
  r.status = 200;
  r.content_type = "text/event-stream";
  r.headers.emplace_back("cache-control", "no-store");
  r.stream = std::make_shared<QueueStream>(std::move(q), *co, format != nullptr && *format == "v8");
  r.heartbeat = ": keep-alive\n\n";
  r.heartbeat_interval = std::chrono::milliseconds(options_.stream_keepalive_ms);
  call->respond(std::move(r));
}

void QueueApi::Enqueue(const JsonCallPtr& call) {
  const std::shared_ptr<engine::Engine>& engine = call->db->engine;
  auto enqueues =
      codec::ParseQueueEnqueueRequest(call->req.body, options_.v8_write_format, engine->now_ms());
  if (!enqueues.ok()) return call->Fail(enqueues.status());
  if (auto q = queue::Queue::QueueFor(*engine)) {
    if (Status s = q->AdmitEnqueue(enqueues->size()); !s.ok()) return call->Fail(s);
  }
  AtomicWrite w;
  w.enqueues = std::move(*enqueues);
  if (options_.portable_v8_values) portable_.OnWrite(&w, engine->limits(), engine->now_ms());
  engine->Write(std::move(w), [call](Result<CommitResult> r) {
    Guarded(*call, [&] {
      if (!r.ok()) return call->Fail(r.status());
      call->respond(
          Json("{\"ok\":true,\"versionstamp\":\"" + codec::VersionToHex(r->version) + "\"}"));
    });
  });
}

// --- The admin API's queue resources -----------------------------------------------------------

namespace {

void Counts(const JsonCallPtr& call) {
  std::shared_ptr<queue::Queue> q = QueueOf(*call);
  q->Counts([call, q](Result<queue::QueueCounts> c) {
    if (!c.ok()) return call->Fail(c.status());
    call->respond(Json(codec::QueueCountsJson(*c, std::max<int64_t>(0, q->undelivered()))));
  });
}

std::string DeadLetterJson(const queue::DeadLetter& d) {
  auto value = codec::QueueValueJson(d.payload, /*v8=*/false);
  std::string keys = "[";
  for (size_t k = 0; k < d.keys_if_undelivered.size(); ++k) {
    if (k > 0) keys.push_back(',');
    keys += codec::KeyToJson(d.keys_if_undelivered[k]);
  }
  keys += "]";
  return "{\"id\":" + codec::JsonQuote(d.id) +
         ",\"value\":" + (value.ok() ? *value : *codec::QueueValueJson(d.payload, /*v8=*/true)) +
         ",\"keys_if_undelivered\":" + keys + ",\"attempts\":" + std::to_string(d.attempts) +
         ",\"last_error\":" + codec::JsonQuote(d.last_error) +
         ",\"dead_at\":" + std::to_string(d.dead_at_ms) + "}";
}

void ListDead(const JsonCallPtr& call, const codec::QueueDeadListJson& req) {
  const size_t limit = static_cast<size_t>(req.limit);
  QueueOf(*call)->ListDead(
      req.cursor, limit, [call, limit](Result<std::vector<queue::DeadLetter>> r) {
        if (!r.ok()) return call->Fail(r.status());
        std::string out = "{\"dead_letters\":";
        codec::AppendJsonArray(
            *r, [](const queue::DeadLetter& d, std::string* o) { *o += DeadLetterJson(d); }, &out);
        out += ",\"cursor\":";
        out += r->size() == limit && !r->empty() ? codec::JsonQuote(r->back().id) : "null";
        out += "}";
        call->respond(Json(std::move(out)));
      });
}

void SettleDead(bool requeue, const JsonCallPtr& call, codec::QueueDeadJson req) {
  auto done = [call](Result<int64_t> n) {
    if (!n.ok()) return call->Fail(n.status());
    call->respond(Json("{\"count\":" + std::to_string(*n) + "}"));
  };
  std::shared_ptr<queue::Queue> q = QueueOf(*call);
  if (requeue) {
    q->RequeueDead(std::move(req.ids), req.all, std::move(done));
  } else {
    q->PurgeDead(std::move(req.ids), req.all, std::move(done));
  }
}

}  // namespace

void AddQueueAdminRoutes(const JsonApi& json, Router* router, const std::string& database_pattern) {
  constexpr char kUsePost[] = "POST with a JSON body.";
  auto add = [&](const char* name, std::vector<std::string> methods, const char* path,
                 JsonHandler handle, const char* use) {
    json.Add(router, {name,
                      std::move(methods),
                      {database_pattern + path},
                      JsonNeeds::kDatabase,
                      QueueRunning,
                      std::move(handle),
                      use});
  };
  auto settle_dead = [](bool requeue) {
    return JsonApi::WithBody<codec::QueueDeadJson>(
        &codec::ParseQueueDeadRequest, [requeue](const JsonCallPtr& c, codec::QueueDeadJson req) {
          SettleDead(requeue, c, std::move(req));
        });
  };
  add("admin_queue_counts", {"GET", "HEAD"}, "/queue", Counts, "GET.");
  add("admin_queue_dead_list", {"POST"}, "/queue/dead/list",
      JsonApi::WithBody(&codec::ParseQueueDeadListRequest, ListDead), kUsePost);
  add("admin_queue_dead_requeue", {"POST"}, "/queue/dead/requeue", settle_dead(true), kUsePost);
  add("admin_queue_dead_purge", {"POST"}, "/queue/dead/purge", settle_dead(false), kUsePost);
  // Anything else under queue/: 405 but for POST, which is 404 (as the admin API answers).
  add(
      "admin", {"POST"}, "/queue/{path...}",
      [](const JsonCallPtr& c) {
        c->Fail(NotFound("No admin API resource at " + c->req.path + "."));
      },
      kUsePost);
}

}  // namespace kvc::service
