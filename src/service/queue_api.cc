#include "service/queue_api.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <utility>
#include <vector>

#include "codec/admin_json.h"
#include "codec/json_text.h"
#include "codec/v8_json.h"
#include "codec/v8_portable.h"
#include "codec/versionstamp.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "engine/engine.h"
#include "queue/queue.h"
#include "service/admin_api.h"
#include "service/query.h"

namespace kvc::service {
namespace {

HttpResponse Json(std::string body) {
  HttpResponse r;
  r.status = 200;
  r.content_type = "application/json";
  r.headers.emplace_back("cache-control", "no-store");
  r.body = std::move(body);
  return r;
}

// A delivery as the API shows it (docs/queues.md).
Result<std::string> DeliveryJson(const queue::Delivery& d, bool v8) {
  KVC_ASSIGN_OR_RETURN(std::string value, QueueValueOf(d.payload, v8));
  std::string out = "{\"id\":" + codec::JsonQuote(d.id) +
                    ",\"lease\":" + codec::JsonQuote(d.lease) + ",\"value\":" + value +
                    ",\"attempt\":" + std::to_string(d.attempt) +
                    ",\"lease_expires_at\":" + std::to_string(d.lease_expires_ms) + "}";
  return out;
}

// Runs `fn`; a throw (a bug) becomes a 500 instead of a lost response.
template <typename Fn>
void Guarded(const Responder& respond, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    spdlog::error("queue API handler failed: {}", e.what());
    respond(AdminErrorResponse(Internal("An internal server error occurred.")));
  }
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

struct QueueApi::Call {
  HttpRequest req;
  Responder respond;
  std::string token;
  std::string database;  // as named in the URL
  std::string op;
  Principal who;

  void Fail(const Status& s) const { respond(AdminErrorResponse(s)); }
};

QueueApi::QueueApi(QueueApiOptions options, Directory* directory, Authenticator* auth,
                   WorkPool* body_pool)
    : options_(options), directory_(directory), auth_(auth), body_pool_(body_pool) {}

void QueueApi::Handle(HttpRequest request, Responder respond) {
  auto call = std::make_shared<Call>();
  call->respond = std::move(respond);
  // /queue/v1/OP or /databases/NAME/queue/v1/OP (the router matched one of the two).
  const std::string& path = request.path;
  const std::string prefix = kPath;
  size_t at = std::string::npos;
  if (path.compare(0, prefix.size(), prefix) == 0) {
    call->database = "default";
    at = prefix.size();
  } else {
    const std::string dbs = "/databases/";
    const size_t slash = path.find('/', dbs.size());
    if (path.compare(0, dbs.size(), dbs) == 0 && slash != std::string::npos &&
        path.compare(slash, prefix.size(), prefix) == 0) {
      call->database = path.substr(dbs.size(), slash - dbs.size());
      at = slash + prefix.size();
    }
  }
  if (at == std::string::npos || at >= path.size() || path.find('/', at) != std::string::npos) {
    call->Fail(NotFound("No queue API resource at " + path + "."));
    return;
  }
  call->op = path.substr(at);
  auto token = auth_->BearerToken(request);
  if (!token.ok()) {
    call->Fail(token.status());
    return;
  }
  call->token = std::move(*token);
  call->req = std::move(request);
  Authenticate(call);
}

void QueueApi::Authenticate(const std::shared_ptr<Call>& call) {
  std::string token = call->token;
  auth_->AuthenticateThen(std::move(token), [this, call](Result<Principal> who, const auto& snap) {
    if (!who.ok()) {
      call->Fail(who.status());
      return;
    }
    call->who = std::move(*who);
    if (body_pool_ == nullptr) {
      Guarded(call->respond, [&] { Route(call, *snap, /*may_refresh=*/true); });
      return;
    }
    // Route parses and validates the body: CPU work for the pool, not an I/O thread.
    Status posted = body_pool_->Post([this, call, snap] {
      Guarded(call->respond, [&] { Route(call, *snap, /*may_refresh=*/true); });
    });
    if (!posted.ok()) call->Fail(posted);
  });
}

void QueueApi::Route(const std::shared_ptr<Call>& call, const Directory::Snapshot& snap,
                     bool may_refresh) {
  const Directory::Database* db = snap.Find(call->database);
  if (db == nullptr) {
    if (may_refresh) {
      directory_->RefreshThen([this, call](const std::shared_ptr<const Directory::Snapshot>& f) {
        Guarded(call->respond, [&] { Route(call, *f, /*may_refresh=*/false); });
      });
      return;
    }
    call->Fail(NotFound("Database '" + call->database + "' not found."));
    return;
  }
  if (Status s = auth_->AdmitToDatabase(call->who, *db, call->database); !s.ok()) {
    call->Fail(s);
    return;
  }
  if (call->who.scope == auth::Scope::kRead) {
    call->Fail(PermissionDenied("This access token is read-only; the queue API is not permitted."));
    return;
  }
  std::shared_ptr<queue::Queue> q = queue::Queue::QueueFor(*db->engine);
  if (!q) {
    call->Fail(Unavailable("Queue delivery is not running for this database, try again later."));
    return;
  }
  const std::string& method = call->req.method;
  const bool stream = call->op == "stream";
  if ((stream && method != "GET") || (!stream && method != "POST")) {
    call->Fail(
        Status(StatusCode::kMethodNotAllowed, "Method " + method + " is not allowed here; use " +
                                                  (stream ? "GET." : "POST with a JSON body.")));
    return;
  }
  if (call->op == "enqueue") {
    Enqueue(call, *db);
    return;
  }
  if (call->op == "pull") {
    auto req = codec::ParseQueuePullRequest(call->req.body);
    if (!req.ok()) {
      call->Fail(req.status());
      return;
    }
    queue::PullRequest pr;
    pr.max_messages = static_cast<size_t>(req->max_messages);
    pr.visibility_ms = req->visibility_ms;
    pr.wait_ms = req->wait_ms;
    pr.gone = call->req.client_gone;
    q->Pull(pr, [call, v8 = req->v8](Result<std::vector<queue::Delivery>> r) {
      Guarded(call->respond, [&] {
        if (!r.ok()) {
          call->Fail(r.status());
          return;
        }
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
    return;
  }
  if (call->op == "ack" || call->op == "nack" || call->op == "extend") {
    auto req = codec::ParseQueueSettleRequest(call->req.body);
    if (!req.ok()) {
      call->Fail(req.status());
      return;
    }
    queue::SettleRequest sr;
    sr.kind = call->op == "ack"    ? queue::SettleKind::kAck
              : call->op == "nack" ? queue::SettleKind::kNack
                                   : queue::SettleKind::kExtend;
    sr.leases = std::move(req->leases);
    sr.delay_ms = req->delay_ms;
    sr.error = std::move(req->error);
    sr.visibility_ms = req->visibility_ms;
    q->Settle(std::move(sr), [call](Result<std::vector<queue::SettleResult>> r) {
      Guarded(call->respond, [&] {
        if (!r.ok()) {
          call->Fail(r.status());
          return;
        }
        std::string out = "{\"results\":[";
        for (size_t i = 0; i < r->size(); ++i) {
          const queue::SettleResult& s = (*r)[i];
          if (i > 0) out.push_back(',');
          out += "{\"lease\":" + codec::JsonQuote(s.lease) + ",\"status\":\"" +
                 queue::SettleStatusName(s.status) + "\"";
          if (s.lease_expires_ms > 0) {
            out += ",\"lease_expires_at\":" + std::to_string(s.lease_expires_ms);
          }
          out.push_back('}');
        }
        out += "]}";
        call->respond(Json(std::move(out)));
      });
    });
    return;
  }
  if (stream) {
    auto params = ParseQuery(call->req.query);
    if (!params.ok()) {
      call->Fail(params.status());
      return;
    }
    queue::ConsumerOptions co;
    auto in_flight = IntParam(*params, "max_in_flight", 10);
    auto visibility = IntParam(*params, "visibility_timeout", 0);
    if (!in_flight.ok() || !visibility.ok()) {
      call->Fail(!in_flight.ok() ? in_flight.status() : visibility.status());
      return;
    }
    if (*in_flight < 1 ||
        *in_flight > static_cast<int64_t>(q->options().max_in_flight_per_consumer)) {
      call->Fail(InvalidArgument("max_in_flight must be between 1 and " +
                                 std::to_string(q->options().max_in_flight_per_consumer) + "."));
      return;
    }
    if (*visibility != 0 && (*visibility < q->options().min_visibility_ms ||
                             *visibility > q->options().max_visibility_ms)) {
      call->Fail(InvalidArgument("visibility_timeout must be between " +
                                 std::to_string(q->options().min_visibility_ms) + " and " +
                                 std::to_string(q->options().max_visibility_ms) + " ms."));
      return;
    }
    co.max_in_flight = static_cast<size_t>(*in_flight);
    co.visibility_ms = *visibility;
    const std::string* format = FindParam(*params, "format");
    if (format != nullptr && *format != "json" && *format != "v8") {
      call->Fail(InvalidArgument("format must be json or v8."));
      return;
    }
    HttpResponse r;
    r.status = 200;
    r.content_type = "text/event-stream";
    r.headers.emplace_back("cache-control", "no-store");
    r.stream =
        std::make_shared<QueueStream>(std::move(q), co, format != nullptr && *format == "v8");
    r.heartbeat = ": keep-alive\n\n";
    r.heartbeat_interval = std::chrono::milliseconds(options_.stream_keepalive_ms);
    call->respond(std::move(r));
    return;
  }
  call->Fail(NotFound("No queue API resource at " + call->req.path + "."));
}

void QueueApi::Enqueue(const std::shared_ptr<Call>& call, const Directory::Database& db) {
  const std::shared_ptr<engine::Engine>& engine = db.engine;
  auto enqueues =
      codec::ParseQueueEnqueueRequest(call->req.body, options_.v8_write_format, engine->now_ms());
  if (!enqueues.ok()) {
    call->Fail(enqueues.status());
    return;
  }
  if (auto q = queue::Queue::QueueFor(*engine)) {
    if (Status s = q->AdmitEnqueue(enqueues->size()); !s.ok()) {
      call->Fail(s);
      return;
    }
  }
  AtomicWrite w;
  w.enqueues = std::move(*enqueues);
  if (options_.portable_v8_values) portable_.OnWrite(&w, engine->limits(), engine->now_ms());
  engine->Write(std::move(w), [call](Result<CommitResult> r) {
    Guarded(call->respond, [&] {
      if (!r.ok()) {
        call->Fail(r.status());
        return;
      }
      call->respond(Json("{\"ok\":true,\"versionstamp\":\"" +
                         codec::VersionstampToHex(codec::VersionToVersionstamp(r->version)) +
                         "\"}"));
    });
  });
}

bool HandleQueueAdmin(const Directory::Database& db, const std::string& rest,
                      const HttpRequest& request, const Responder& respond) {
  if (rest != "queue" && rest.compare(0, 6, "queue/") != 0) return false;
  auto fail = [respond](const Status& s) { respond(AdminErrorResponse(s)); };
  std::shared_ptr<queue::Queue> q = queue::Queue::QueueFor(*db.engine);
  if (!q) {
    fail(Unavailable("Queue delivery is not running for this database, try again later."));
    return true;
  }
  const std::string& method = request.method;
  if (rest == "queue") {
    if (method != "GET" && method != "HEAD") {
      fail(Status(StatusCode::kMethodNotAllowed,
                  "Method " + method + " is not allowed here; use GET."));
      return true;
    }
    q->Counts([respond, fail, q](Result<queue::QueueCounts> c) {
      if (!c.ok()) {
        fail(c.status());
        return;
      }
      respond(Json(
          "{\"ready\":" + std::to_string(c->ready) + ",\"delayed\":" + std::to_string(c->delayed) +
          ",\"leased\":" + std::to_string(c->leased) + ",\"dead\":" + std::to_string(c->dead) +
          ",\"undelivered\":" + std::to_string(std::max<int64_t>(0, q->undelivered())) + "}"));
    });
    return true;
  }
  if (method != "POST") {
    fail(Status(StatusCode::kMethodNotAllowed,
                "Method " + method + " is not allowed here; use POST with a JSON body."));
    return true;
  }
  if (rest == "queue/dead/list") {
    auto req = codec::ParseQueueDeadListRequest(request.body);
    if (!req.ok()) {
      fail(req.status());
      return true;
    }
    const size_t limit = static_cast<size_t>(req->limit);
    q->ListDead(
        req->cursor, limit, [respond, fail, limit](Result<std::vector<queue::DeadLetter>> r) {
          if (!r.ok()) {
            fail(r.status());
            return;
          }
          std::string out = "{\"dead_letters\":[";
          for (size_t i = 0; i < r->size(); ++i) {
            const queue::DeadLetter& d = (*r)[i];
            auto value = codec::QueueValueJson(d.payload, /*v8=*/false);
            std::string keys = "[";
            for (size_t k = 0; k < d.keys_if_undelivered.size(); ++k) {
              if (k > 0) keys.push_back(',');
              keys += codec::KeyToJson(d.keys_if_undelivered[k]);
            }
            keys += "]";
            if (i > 0) out.push_back(',');
            out += "{\"id\":" + codec::JsonQuote(d.id) + ",\"value\":" +
                   (value.ok() ? *value : *codec::QueueValueJson(d.payload, /*v8=*/true)) +
                   ",\"keys_if_undelivered\":" + keys +
                   ",\"attempts\":" + std::to_string(d.attempts) +
                   ",\"last_error\":" + codec::JsonQuote(d.last_error) +
                   ",\"dead_at\":" + std::to_string(d.dead_at_ms) + "}";
          }
          out += "],\"cursor\":";
          out += r->size() == limit && !r->empty() ? codec::JsonQuote(r->back().id) : "null";
          out += "}";
          respond(Json(std::move(out)));
        });
    return true;
  }
  if (rest == "queue/dead/requeue" || rest == "queue/dead/purge") {
    auto req = codec::ParseQueueDeadRequest(request.body);
    if (!req.ok()) {
      fail(req.status());
      return true;
    }
    auto done = [respond, fail](Result<int64_t> n) {
      if (!n.ok()) {
        fail(n.status());
        return;
      }
      respond(Json("{\"count\":" + std::to_string(*n) + "}"));
    };
    if (rest == "queue/dead/requeue") {
      q->RequeueDead(std::move(req->ids), req->all, std::move(done));
    } else {
      q->PurgeDead(std::move(req->ids), req->all, std::move(done));
    }
    return true;
  }
  fail(NotFound("No admin API resource at " + request.path + "."));
  return true;
}

}  // namespace kvc::service
