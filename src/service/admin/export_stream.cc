#include "service/admin/export_stream.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "codec/versionstamp.h"
#include "common/mutex.h"
#include "service/admin/dump.h"

namespace kvc::service {
namespace {

// The response body of one export. The scan's reader thread calls OnPage; the session calls
// Start and Cancel on its I/O thread, and the sink's `written` callbacks arrive there too.
// The most dump text handed to the session in one SendThen (progress is seen per piece).
constexpr size_t kPieceBytes = size_t{64} << 10;

class ExportStream : public StreamSource, public std::enable_shared_from_this<ExportStream> {
 public:
  explicit ExportStream(const ExportOptions& options) : options_(options) {}

  void Start(std::shared_ptr<StreamSink> sink) override {
    {
      MutexLock lock(mu_);
      if (!cancelled_) sink_ = std::move(sink);
    }
    cv_.NotifyAll();
  }

  // After it returns the scan never touches the sink again: it waits out a send in progress.
  void Cancel() override {
    MutexLock lock(mu_);
    cancelled_ = true;
    sink_.reset();
    cv_.NotifyAll();
    while (sending_) cv_.Wait(mu_);
  }

  // Renders and sends one page once the window allows; false ends the scan.
  bool OnPage(Result<engine::ScanPage> page) {
    if (!page.ok()) {
      spdlog::warn("export cut short: {}", page.status().ToString());
      Deliver("", /*last=*/false, /*abort=*/true);
      return false;
    }
    std::string text;
    for (const Entry& e : page->entries) {
      auto line = DumpLine(e);
      if (!line.ok()) {
        spdlog::error("export cut short: an entry cannot be written as JSON: {}",
                      line.status().ToString());
        Deliver("", false, true);
        return false;
      }
      text += *line;
    }
    return Deliver(text, page->last, false);
  }

 private:
  // Waits for the session (Start) and for room in the window, then hands `text` to the sink
  // (and closes or aborts the body). Returns whether the scan should go on.
  bool Deliver(const std::string& text, bool last, bool abort) {
    std::shared_ptr<StreamSink> sink;
    bool stalled = false;
    {
      MutexLock lock(mu_);
      // The stall clock restarts whenever the client takes a piece (OnWritten): a slow reader
      // that keeps taking is never cut off, only one that takes nothing for the whole timeout.
      const auto stall = std::chrono::milliseconds(options_.stall_timeout_ms);
      last_progress_ = std::chrono::steady_clock::now();
      while (!cancelled_ && (sink_ == nullptr || (!abort && inflight_ > options_.window_bytes))) {
        if (!cv_.WaitUntil(mu_, last_progress_ + stall) &&
            std::chrono::steady_clock::now() >= last_progress_ + stall) {
          break;
        }
      }
      if (cancelled_ || sink_ == nullptr) return false;  // gone, or never started in time
      stalled = !abort && inflight_ > options_.window_bytes;
      sink = sink_;
      sending_ = true;
      if (!stalled && !abort) inflight_ += text.size();
    }
    if (stalled) {
      spdlog::info("export: the client took nothing for {} ms; ending the export",
                   options_.stall_timeout_ms);
      sink->Abort();
    } else if (abort) {
      sink->Abort();
    } else {
      // Sent in pieces, each reported when it left the session, so the stall clock sees a
      // slow client's progress within a page (a page of large values can be megabytes).
      std::weak_ptr<ExportStream> weak = weak_from_this();
      for (size_t at = 0; at < text.size(); at += kPieceBytes) {
        const size_t n = std::min(kPieceBytes, text.size() - at);
        sink->SendThen(text.substr(at, n), [weak, n] {
          if (auto self = weak.lock()) self->OnWritten(n);
        });
      }
      if (last) sink->Close();
    }
    {
      MutexLock lock(mu_);
      sending_ = false;
    }
    cv_.NotifyAll();
    return !stalled && !abort && !last;
  }

  void OnWritten(size_t n) {
    {
      MutexLock lock(mu_);
      inflight_ -= n;
      last_progress_ = std::chrono::steady_clock::now();
    }
    cv_.NotifyAll();
  }

  const ExportOptions options_;
  Mutex mu_;
  CondVar cv_;
  std::shared_ptr<StreamSink> sink_ KVC_GUARDED_BY(mu_);
  bool cancelled_ KVC_GUARDED_BY(mu_) = false;
  bool sending_ KVC_GUARDED_BY(mu_) = false;  // the scan is calling the sink outside mu_
  size_t inflight_ KVC_GUARDED_BY(mu_) = 0;   // bytes sent and not yet written out
  // When the client last took a piece (or the current wait began).
  std::chrono::steady_clock::time_point last_progress_ KVC_GUARDED_BY(mu_);
};

}  // namespace

void StartExport(const std::shared_ptr<engine::Engine>& engine, std::string start, std::string end,
                 const ExportOptions& options, std::function<void(Result<HttpResponse>)> respond) {
  auto stream = std::make_shared<ExportStream>(options);
  // Calls of one scan are sequential, so this needs no lock.
  auto answered = std::make_shared<bool>(false);
  engine->SnapshotScan(
      std::move(start), std::move(end), options.page_entries,
      [stream, answered, respond = std::move(respond)](Result<engine::ScanPage> page) {
        if (!*answered) {
          *answered = true;
          if (!page.ok()) {
            respond(page.status());
            return false;
          }
          HttpResponse r;
          r.status = 200;
          r.content_type = "application/x-ndjson";
          r.headers.emplace_back("cache-control", "no-store");
          r.headers.emplace_back("x-kvc-versionstamp", codec::VersionToHex(page->version));
          r.stream = stream;
          respond(std::move(r));
        }
        return stream->OnPage(std::move(page));
      });
}

}  // namespace kvc::service
