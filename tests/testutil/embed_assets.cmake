# Writes a C++ source embedding each file of FILES (a comma-separated list) byte for byte, as
# the kvc::service::kConsoleAssets table of service/admin/console.h (the web console's static files).
# Binary-safe: every file becomes an array of byte values, so any content (NUL bytes, a
# sequence that would end a raw string literal) survives. Each array has one extra 0 byte so
# that an empty file is still a valid array; the recorded size leaves it out.
string(REPLACE "," ";" FILES "${FILES}")
set(arrays "")
set(table "")
set(index 0)
foreach(f ${FILES})
  file(READ ${f} hex HEX)
  file(SIZE ${f} size)
  get_filename_component(name ${f} NAME)
  # 16 bytes (32 hex digits) a line, then each pair of hex digits as 0xNN.
  string(REGEX REPLACE "([0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])"
         "\\1\n    " hex "${hex}")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND arrays "const unsigned char kAsset${index}[] = {\n    ${bytes}0x00};\n")
  string(APPEND table "    {\"${name}\", kAsset${index}, ${size}},\n")
  math(EXPR index "${index} + 1")
endforeach()
file(WRITE ${OUT} "// Generated from src/console/ by tests/testutil/embed_assets.cmake; do not edit.
#include \"service/admin/console.h\"

namespace kvc::service {
namespace {

${arrays}
}  // namespace

const ConsoleAsset kConsoleAssets[] = {
${table}};
const size_t kConsoleAssetCount = ${index};

}  // namespace kvc::service
")
