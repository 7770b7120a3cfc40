#include "backup/snapshot_writer.h"

#include <memory>

#include "storage/migration.h"
#include "storage/snapshot_file.h"

namespace kvc::backup {

Result<SnapshotFileInfo> WriteSnapshotFile(storage::Reader& reader, const std::string& path,
                                           const SnapshotWriteOptions& options) {
  storage::SnapshotRowsCopy copied;
  {
    KVC_ASSIGN_OR_RETURN(std::unique_ptr<storage::Backend> file, storage::CreateSnapshotFile(path));
    KVC_ASSIGN_OR_RETURN(std::unique_ptr<storage::Writer> writer, file->OpenWriter());
    KVC_RETURN_IF_ERROR(reader.Begin());
    storage::CopyOptions o;
    o.batch_rows = options.page_rows;
    o.queue = true;
    Result<storage::SnapshotRowsCopy> r = storage::CopySnapshotRows(reader, *writer, o);
    reader.End();
    KVC_RETURN_IF_ERROR(r.status());
    copied = std::move(*r);
  }  // the file's connections closed: sealing needs it to itself
  KVC_ASSIGN_OR_RETURN(const int64_t bytes, storage::SealSnapshotFile(path));
  SnapshotFileInfo info;
  info.version = copied.copied.version;
  info.key_count = copied.copied.keys;
  info.bytes = bytes;
  info.queue_messages = copied.queue_messages;
  info.dead_letters = copied.dead_letters;
  return info;
}

}  // namespace kvc::backup
