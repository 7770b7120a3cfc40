// Secrets `serve` takes from files or the environment instead of the command line, where every
// local user can read them (`ps`, /proc/PID/cmdline): the bootstrap access token
// (--access-token-file PATH) and the signing secrets of push delivery
// (--queue-push-secret-file NAME=PATH, env KVCONNECT_QUEUE_PUSH_SECRET).
//
// A secret file must be a regular file that others cannot read: mode o+r is refused with an
// error naming the file and the chmod that fixes it; a file the group may read is accepted with
// a warning (Kubernetes' fsGroup and systemd credentials give files group read access, and a
// group is chosen by the operator). Trailing newlines and spaces are dropped.
//
// Thread-safety: functions only; call them from one thread at start-up.
#pragma once

#include <string>
#include <vector>

#include "cli/serve.h"
#include "common/status.h"

namespace kvc::cli {

// The environment variable read for push signing secrets when no --queue-push-secret is
// given: NAME=whsec_... entries separated by commas or whitespace.
inline constexpr const char* kPushSecretEnv = "KVCONNECT_QUEUE_PUSH_SECRET";

// Reads the secret in `path` (see above). `flag` names the option in messages. Returns the
// content without trailing newlines and spaces. Errors: InvalidArgument (readable by others,
// not a regular file, empty), NotFound (no such file), IoError.
Result<std::string> ReadSecretFile(const std::string& path, const std::string& flag);

// Fills the secrets of `c` from its files and the environment: `access_token` from
// `access_token_file` (InvalidArgument if both are given); each `queue_push_secret_files`
// entry NAME=PATH adds NAME=<line> to `queue_push_secrets` for every non-empty line of PATH
// (two lines during a rotation); with neither --queue-push-secret nor a file given, entries
// from KVCONNECT_QUEUE_PUSH_SECRET. Errors as ReadSecretFile, plus InvalidArgument for an entry
// that is not NAME=PATH or a token file of more than one line.
Status LoadServeSecrets(ServeConfig& c);

}  // namespace kvc::cli
