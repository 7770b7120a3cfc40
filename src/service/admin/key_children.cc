#include "service/admin/key_children.h"

#include <algorithm>
#include <utility>

#include "codec/key_codec.h"

namespace kvc::service {

std::string NextKeyPart(std::string_view key, size_t prefix_size, bool* raw) {
  const std::string_view rest = key.substr(std::min(prefix_size, key.size()));
  size_t consumed = 0;
  std::vector<codec::KeyPart> parts = codec::DecodeCanonicalKeyPrefix(rest, &consumed);
  if (parts.empty()) {
    *raw = true;
    return std::string(rest);
  }
  *raw = false;
  parts.erase(parts.begin() + 1, parts.end());
  return codec::EncodeKey(parts);
}

namespace {

// The walk's state between engine reads. Each pending read holds it.
class ChildWalk : public std::enable_shared_from_this<ChildWalk> {
 public:
  ChildWalk(std::shared_ptr<engine::Engine> engine, std::string prefix, std::string start,
            std::string end, int32_t limit, const KeyChildrenOptions& options,
            std::function<void(Result<KeyChildrenResult>)> done)
      : engine_(std::move(engine)),
        prefix_(std::move(prefix)),
        pos_(std::move(start)),
        end_(std::move(end)),
        limit_(static_cast<size_t>(std::max<int32_t>(limit, 1))),
        options_(options),
        budget_(std::max<int64_t>(options.max_scan_rows, 1)),
        done_(std::move(done)) {}

  void Read() {
    if (pos_ >= end_) return Finish("");
    const auto max_read = static_cast<int64_t>(engine_->limits().max_read_entries);
    int64_t n = std::min<int64_t>({options_.read_page, max_read, budget_});
    // A part being counted needs at most the rows that take it to the cap.
    if (current_) {
      n = std::min<int64_t>(n, std::max<int64_t>(1, cap() - current_->count));
    } else {
      // Parts of one entry each (the common case deep in a tree) fill the page with one more
      // row than the parts still wanted; larger parts take more reads.
      n = std::min<int64_t>(n, static_cast<int64_t>(limit_ - children_.size()) + 1);
    }
    asked_ = static_cast<int32_t>(std::max<int64_t>(n, 1));
    auto self = shared_from_this();
    engine_->SnapshotRead({ReadRange{pos_, end_, asked_, false}},
                          [self](Result<engine::ReadResult> r) { self->OnRead(std::move(r)); });
  }

 private:
  int64_t cap() const { return std::max<int64_t>(options_.count_cap, 1); }

  std::string EndOf(const KeyChild& child) const {
    std::string end = prefix_ + child.part;
    end.push_back('\xff');
    return end;
  }

  void OnRead(Result<engine::ReadResult> r) {
    if (!r.ok()) return done_(r.status());
    std::vector<Entry>& rows = r->ranges[0];
    budget_ -= static_cast<int64_t>(rows.size());
    for (Entry& row : rows) {
      bool raw = false;
      std::string part = NextKeyPart(row.key, prefix_.size(), &raw);
      if (current_ && !current_->raw && !raw && part == current_->part) {
        ++current_->count;
      } else {
        if (current_) {
          children_.push_back(std::move(*current_));
          current_.reset();
          // A new part starts at this row: the next page starts here.
          if (children_.size() >= limit_) return Finish(row.key);
        }
        current_ = KeyChild{std::move(part), raw, 1, false, std::nullopt};
        if (row.key.size() == prefix_.size() + current_->part.size()) current_->entry = row;
      }
      if (current_->count >= cap()) {
        // Enough: skip to the end of this part's range.
        current_->capped = true;
        return JumpPastCurrent();
      }
    }
    if (rows.size() < static_cast<size_t>(asked_)) {  // the range is exhausted
      if (current_) children_.push_back(std::move(*current_));
      current_.reset();
      return Finish("");
    }
    pos_ = rows.back().key;
    pos_.push_back('\0');
    if (budget_ <= 0) {
      if (current_) current_->capped = true;
      return JumpPastCurrent();
    }
    Read();
  }

  // Closes the part being counted and continues after its range (or stops when the page is
  // full or the budget spent).
  void JumpPastCurrent() {
    std::string next = EndOf(*current_);
    children_.push_back(std::move(*current_));
    current_.reset();
    if (next >= end_) return Finish("");
    if (children_.size() >= limit_ || budget_ <= 0) return Finish(std::move(next));
    pos_ = std::move(next);
    Read();
  }

  void Finish(std::string next_start) {
    KeyChildrenResult out;
    out.children = std::move(children_);
    out.next_start = std::move(next_start);
    done_(std::move(out));
  }

  const std::shared_ptr<engine::Engine> engine_;
  const std::string prefix_;
  std::string pos_;
  const std::string end_;
  const size_t limit_;
  const KeyChildrenOptions options_;
  int64_t budget_;
  int32_t asked_ = 0;
  std::vector<KeyChild> children_;
  std::optional<KeyChild> current_;
  std::function<void(Result<KeyChildrenResult>)> done_;
};

}  // namespace

void ListKeyChildren(std::shared_ptr<engine::Engine> engine, std::string prefix, std::string start,
                     std::string end, int32_t limit, const KeyChildrenOptions& options,
                     std::function<void(Result<KeyChildrenResult>)> done) {
  auto walk = std::make_shared<ChildWalk>(std::move(engine), std::move(prefix), std::move(start),
                                          std::move(end), limit, options, std::move(done));
  walk->Read();
}

}  // namespace kvc::service
