// Tables that name the values of an enum, read both ways: one table per enum instead of a
// switch from value to name and a chain of comparisons from name to value.
//
// Thread-safety: pure functions over constant tables.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace kvc {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// The name `table` gives `value`, or `fallback` when the table has none for it.
template <typename E, std::size_t N>
constexpr const char* NameIn(const EnumName<E> (&table)[N], E value, const char* fallback) {
  for (const EnumName<E>& e : table) {
    if (e.value == value) return e.name;
  }
  return fallback;
}

// The value `table` names `name`, or nullopt when it names none so.
template <typename E, std::size_t N>
constexpr std::optional<E> ValueIn(const EnumName<E> (&table)[N], std::string_view name) {
  for (const EnumName<E>& e : table) {
    if (name == e.name) return e.value;
  }
  return std::nullopt;
}

}  // namespace kvc
