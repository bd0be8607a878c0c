#pragma once
#include <cstdint>

namespace prefetchlab::core {

// A per-module cost that grows with the micro-batch: value(b, s) =
//   fixed + b*s*(per_token + per_token_per_position * s).
// per_token_per_position carries the s^2 terms (attention scores, attention activations).
struct TokenScaled {
  std::int64_t fixed = 0;
  std::int64_t per_token = 0;
  std::int64_t per_token_per_position = 0;

  std::int64_t at(std::int64_t micro_batch, std::int64_t seq_len) const {
    return fixed + micro_batch * seq_len * (per_token + per_token_per_position * seq_len);
  }
  TokenScaled& operator+=(const TokenScaled& other) {
    fixed += other.fixed;
    per_token += other.per_token;
    per_token_per_position += other.per_token_per_position;
    return *this;
  }
};

}  // namespace prefetchlab::core
