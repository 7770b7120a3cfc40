// The two XML answers the S3 target reads: a ListObjectsV2 page and an error body.
//
// A small, strict reader of our own for the subset of XML 1.0 that S3 sends: an optional XML
// declaration, elements with attributes, character data with the five predefined entities and
// character references (&#N; &#xH;), CDATA sections, comments and processing instructions.
// Rejected as Corruption: a DOCTYPE (so no entity definitions and no expansion), any other
// entity, mismatched or unclosed tags, text outside the root element, invalid UTF-8, and
// nesting deeper than kMaxXmlDepth. Namespaces are not interpreted: names are compared as
// written (S3 writes unprefixed names with a default namespace).
//
// Thread-safety: pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backup/target.h"
#include "common/status.h"

namespace kvc::backup {

// Deeper XML is refused; S3's answers nest three levels.
inline constexpr int kMaxXmlDepth = 32;

// One page of a ListObjectsV2 answer.
struct ListPage {
  std::vector<ObjectInfo> objects;  // <Contents><Key>, <Size>, in the order given
  bool is_truncated = false;
  std::string next_continuation_token;  // non-empty iff is_truncated
};

// Parses a <ListBucketResult>. Every <Contents> must hold exactly one <Key> and one <Size> (a
// decimal int64 >= 0); <IsTruncated> must appear once, as "true" or "false"; a truncated page
// must carry a non-empty <NextContinuationToken>. Other elements are ignored. Returns
// Corruption for anything else.
Result<ListPage> ParseListObjectsV2(std::string_view xml);

// An S3 <Error> body: its <Code> and <Message> (either may be empty).
struct S3ErrorBody {
  std::string code;
  std::string message;
};

// Parses an <Error> body. Corruption if `xml` is not one.
Result<S3ErrorBody> ParseS3Error(std::string_view xml);

}  // namespace kvc::backup
