#include "service/admin/dump.h"

#include <algorithm>
#include <istream>
#include <utility>

#include "codec/v8/v8_json.h"
#include "service/range_walker.h"

namespace kvc::service {
namespace {

std::string_view WithoutCr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool Blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

class StringReader : public DumpReader {
 public:
  explicit StringReader(std::string text) : text_(std::move(text)) {}
  Result<std::optional<std::string_view>> Next() override {
    if (pos_ >= text_.size()) return std::optional<std::string_view>();
    const std::string_view all(text_);
    size_t nl = all.find('\n', pos_);
    if (nl == std::string_view::npos) nl = all.size();
    const std::string_view line = all.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return std::optional<std::string_view>(WithoutCr(line));
  }

 private:
  const std::string text_;
  size_t pos_ = 0;
};

class StreamReader : public DumpReader {
 public:
  StreamReader(std::istream* in, size_t max_line_bytes) : in_(in), max_(max_line_bytes) {}
  Result<std::optional<std::string_view>> Next() override {
    line_.clear();
    if (in_->peek() == std::char_traits<char>::eof()) {
      if (in_->bad()) return IoError("reading the dump failed");
      return std::optional<std::string_view>();
    }
    // Read in pieces so a file without newlines cannot take unbounded memory.
    char buf[64 * 1024];
    for (;;) {
      in_->getline(buf, sizeof buf);
      const auto n = static_cast<size_t>(in_->gcount());
      if (in_->bad()) return IoError("reading the dump failed");
      if (!in_->fail()) {  // a whole line (or the last piece of one); '\n' was counted, not stored
        line_.append(buf, n > 0 && !in_->eof() ? n - 1 : n);
        break;
      }
      if (in_->eof()) {  // the last line, without a newline
        line_.append(buf, n);
        break;
      }
      // The buffer filled before a newline: keep going.
      line_.append(buf, n);
      in_->clear();
      if (line_.size() > max_) {
        return InvalidArgument("the line is longer than " + std::to_string(max_) + " bytes");
      }
    }
    if (line_.size() > max_) {
      return InvalidArgument("the line is longer than " + std::to_string(max_) + " bytes");
    }
    return std::optional<std::string_view>(WithoutCr(line_));
  }

 private:
  std::istream* const in_;
  const size_t max_;
  std::string line_;
};

}  // namespace

Result<std::string> DumpLine(const Entry& entry) {
  KVC_ASSIGN_OR_RETURN(std::string json, codec::EntryToJson(entry));
  json.push_back('\n');
  return json;
}

std::unique_ptr<DumpReader> StringDumpReader(std::string text) {
  return std::make_unique<StringReader>(std::move(text));
}

std::unique_ptr<DumpReader> StreamDumpReader(std::istream* in, size_t max_line_bytes) {
  return std::make_unique<StreamReader>(in, max_line_bytes);
}

// --- DumpBatcher --------------------------------------------------------------------------------

DumpBatcher::DumpBatcher(const DumpBatchOptions& options, const engine::Limits& limits)
    : options_(options),
      limits_(limits),
      max_entries_(std::max<size_t>(1, std::min(options.max_entries, limits.max_mutations))),
      max_bytes_(
          std::max<size_t>(1, std::min(options.max_bytes, limits.max_total_mutation_bytes))) {}

Status DumpBatcher::Add(std::string_view line, int64_t line_no, int64_t now_ms) {
  if (Blank(line)) return Status::Ok();
  auto fail = [&](const std::string& why) {
    return InvalidArgument("line " + std::to_string(line_no) + ": " + why);
  };
  auto entry = codec::EntryFromJson(line, options_.v8_format);
  if (!entry.ok()) return fail(entry.status().message());
  const std::string& prefix = options_.prefix;
  if (!prefix.empty() &&
      (entry->key.size() <= prefix.size() || entry->key.compare(0, prefix.size(), prefix) != 0)) {
    return fail("the key is not under the prefix given.");
  }
  // Written, it would be invisible at once (and swept): leave it out, and say how many.
  if (entry->expire_at_ms >= 0 && entry->expire_at_ms <= now_ms) {
    ++skipped_expired_;
    return Status::Ok();
  }
  // The engine's own checks, one entry at a time, so a refusal names its line.
  AtomicWrite one;
  one.mutations.push_back(Mutation{std::move(entry->key), MutationType::kSet,
                                   KvValue{std::move(entry->value), entry->encoding},
                                   /*expire_at_ms=*/entry->expire_at_ms});
  if (Status s = engine::ValidateAtomicWrite(one, limits_, 0); !s.ok()) return fail(s.message());
  Mutation& m = one.mutations.front();
  const size_t size = m.key.size() + m.value.data.size();
  if (!open_.write.mutations.empty() &&
      (open_.write.mutations.size() >= max_entries_ || open_bytes_ + size > max_bytes_)) {
    Close();
  }
  if (open_.write.mutations.empty()) open_.first_line = line_no;
  open_.last_line = line_no;
  open_.entries += 1;
  open_.bytes += static_cast<int64_t>(line.size()) + 1;
  open_bytes_ += size;
  open_.write.mutations.push_back(std::move(m));
  // A full batch is complete now, so a bad line right after it does not hold it back.
  if (open_.write.mutations.size() >= max_entries_) Close();
  return Status::Ok();
}

void DumpBatcher::Close() {
  if (open_.write.mutations.empty()) return;
  ready_.push_back(std::move(open_));
  open_ = DumpBatch();
  open_bytes_ = 0;
}

void DumpBatcher::Finish() { Close(); }

DumpBatch DumpBatcher::TakeReady() {
  DumpBatch b = std::move(ready_.front());
  ready_.erase(ready_.begin());
  return b;
}

// --- BulkImport ---------------------------------------------------------------------------------

BulkImport::BulkImport(std::shared_ptr<engine::Engine> engine, ImportOptions options,
                       std::unique_ptr<DumpReader> reader, Runner run, Progress progress, Done done)
    : engine_(std::move(engine)),
      options_(std::move(options)),
      reader_(std::move(reader)),
      run_(std::move(run)),
      progress_(std::move(progress)),
      done_(std::move(done)),
      batcher_(options_.batch, engine_->limits()),
      next_line_(options_.first_line) {}

void BulkImport::Start(std::shared_ptr<engine::Engine> engine, ImportOptions options,
                       std::unique_ptr<DumpReader> reader, Runner run, Progress progress,
                       Done done) {
  std::shared_ptr<BulkImport> self(new BulkImport(std::move(engine), std::move(options),
                                                  std::move(reader), std::move(run),
                                                  std::move(progress), std::move(done)));
  self->Step();
}

void BulkImport::Step() {
  while (!batcher_.has_ready() && !input_done_) {
    auto line = reader_->Next();
    if (!line.ok()) {
      if (line.status().code() == StatusCode::kInvalidArgument) {
        return Fail(
            InvalidArgument("line " + std::to_string(next_line_) + ": " + line.status().message()),
            next_line_);
      }
      return Fail(line.status(), 0);
    }
    if (!line->has_value()) {
      batcher_.Finish();
      input_done_ = true;
      break;
    }
    if (Status s = batcher_.Add(**line, next_line_, engine_->now_ms()); !s.ok()) {
      return Fail(s, next_line_);
    }
    ++next_line_;
  }
  auto self = shared_from_this();
  if (!batcher_.has_ready()) {
    ClearThen([self] { self->Finish(Status::Ok(), 0); });
    return;
  }
  pending_ = batcher_.TakeReady();
  ClearThen([self] { self->WriteBatch(); });
}

void BulkImport::ClearThen(std::function<void()> next) {
  if (options_.mode != ImportMode::kReplace || cleared_) return next();
  cleared_ = true;
  auto self = shared_from_this();
  DeleteRangeInBatches(engine_, options_.replace_start, options_.replace_end, options_.delete_batch,
                       [self, next = std::move(next)](Result<DeleteRangeResult> r) {
                         if (!r.ok()) return self->Fail(r.status(), 0);
                         self->stats_.deleted = r->deleted;
                         next();
                       });
}

void BulkImport::WriteBatch() {
  auto self = shared_from_this();
  engine_->Write(std::move(pending_.write), [self](Result<CommitResult> r) {
    if (!r.ok()) return self->Fail(r.status(), 0);
    if (!r->ok) return self->Fail(Internal("The engine refused a batch without checks."), 0);
    ImportStats& st = self->stats_;
    st.entries += self->pending_.entries;
    st.bytes += self->pending_.bytes;
    st.batches += 1;
    st.last_line = self->pending_.last_line;
    st.skipped = self->batcher_.skipped_expired();
    if (self->progress_) {
      st.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - self->started_).count();
      self->progress_(st);
    }
    Status queued = self->run_([self] { self->Step(); });
    if (!queued.ok()) self->Fail(queued, 0);
  });
}

void BulkImport::Fail(const Status& status, int64_t bad_line) {
  std::string text = status.message();
  if (!text.empty() && text.back() != '.') text.push_back('.');
  if (stats_.entries == 0) {
    text += " Stopped there; nothing was written.";
  } else {
    const bool one = stats_.entries == 1;
    text += " Stopped there: the " + std::to_string(stats_.entries) +
            (one ? " entry of lines " : " entries of lines ") +
            std::to_string(options_.first_line) + "-" + std::to_string(stats_.last_line) + " (" +
            std::to_string(stats_.batches) + " complete batch" + (stats_.batches == 1 ? "" : "es") +
            (one ? ") was" : ") were") + " imported; nothing from line " +
            std::to_string(stats_.last_line + 1) + " on was written.";
  }
  if (stats_.deleted > 0) {
    text += " Replace mode had deleted " + std::to_string(stats_.deleted) +
            (stats_.deleted == 1 ? " entry" : " entries") + " first.";
  }
  Finish(Status(status.code(), std::move(text)), bad_line);
}

void BulkImport::Finish(Status status, int64_t bad_line) {
  stats_.skipped = batcher_.skipped_expired();
  stats_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  Done done = std::move(done_);
  done_ = nullptr;
  if (done) done(ImportOutcome{std::move(status), stats_, bad_line});
}

// --- DeleteRangeInBatches -----------------------------------------------------------------------

void DeleteRangeInBatches(std::shared_ptr<engine::Engine> engine, std::string start,
                          std::string end, int32_t batch,
                          std::function<void(Result<DeleteRangeResult>)> done) {
  // Each page is deleted in one atomic write, then the walk continues after it. Pages follow
  // one another, so the totals need no lock.
  auto totals = std::make_shared<DeleteRangeResult>();
  auto w = std::make_shared<RangeWalker>();
  const engine::Limits& limits = engine->limits();
  const auto cap = static_cast<int32_t>(std::min(limits.max_mutations, limits.max_read_entries));
  w->page = std::clamp<int32_t>(batch, 1, std::max<int32_t>(cap, 1));
  w->engine = engine;
  w->start = std::move(start);
  w->end = std::move(end);
  w->on_page = [engine = std::move(engine), totals](std::vector<Entry> entries,
                                                    const RangeWalker::Next& next) {
    AtomicWrite write;
    for (Entry& e : entries) {
      write.mutations.push_back(Mutation{std::move(e.key), MutationType::kDelete});
    }
    const auto n = static_cast<int64_t>(write.mutations.size());
    engine->Write(std::move(write), [totals, n, next](const Result<CommitResult>& r) {
      if (r.ok()) {
        totals->deleted += n;
        ++totals->batches;
      }
      next(r.status());
    });
  };
  w->done = [totals, done = std::move(done)](const Status& s) {
    if (!s.ok()) return done(s);
    done(*totals);
  };
  w->Run();
}

}  // namespace kvc::service
