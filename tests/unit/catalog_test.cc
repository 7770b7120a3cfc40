// The catalog's pure rules (storage/catalog.h). Both catalog implementations run one typed test
// of the Catalog contract (tests/integration/catalog_contract_test.cc); what only the SQLite
// catalog does is in sqlite_catalog_test.cc.
#include "storage/catalog.h"

#include <gtest/gtest.h>

#include <string>

namespace kvc {
namespace {

TEST(DatabaseNames, Validation) {
  for (const char* ok : {"a", "sales", "hr-2", "x_y", "0db"}) {
    EXPECT_TRUE(storage::IsValidDatabaseName(ok)) << ok;
  }
  for (const char* bad :
       {"", "-a", "_a", "Sales", "a/b", "a b", "a.b", "0b6f3a8e-1111-4222-8333-444455556666"}) {
    EXPECT_FALSE(storage::IsValidDatabaseName(bad)) << bad;
  }
  EXPECT_FALSE(storage::IsValidDatabaseName(std::string(64, 'a')));
  EXPECT_TRUE(storage::IsValidDatabaseName(std::string(63, 'a')));
}

}  // namespace
}  // namespace kvc
