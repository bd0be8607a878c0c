#pragma once
// "Did you mean ...?" for misspelt keys and names.
#include <string>
#include <string_view>
#include <vector>

namespace prefetchlab::core {

// Levenshtein distance (insert, delete, substitute each cost 1), case-sensitive.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, or "" when none is plausibly meant (distance above
// max(2, |word|/3)), so that a suggestion is never absurd. Ties go to the earlier candidate.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace prefetchlab::core
