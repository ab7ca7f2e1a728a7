// The options of the CPU attention labs on the wire: lab 3's AttentionOptions and lab 7's
// BackwardOptions both hold block_q, block_k, causal and an optional scale.
#pragma once

#include <cstdint>

#include "wire.hpp"

namespace isolation {

template <class Options>
void put_tile_options(Packet& p, const Options& o) {
  p.put<std::int64_t>(o.block_q);
  p.put<std::int64_t>(o.block_k);
  p.put<std::uint8_t>(o.causal);
  p.put<std::uint8_t>(o.scale.has_value());
  p.put<double>(o.scale.value_or(0.0));
}

template <class Options>
Options get_tile_options(Packet& p) {
  Options o;
  o.block_q = int(p.get<std::int64_t>());
  o.block_k = int(p.get<std::int64_t>());
  o.causal = p.get<std::uint8_t>() != 0;
  const bool has_scale = p.get<std::uint8_t>() != 0;
  const double scale = p.get<double>();
  if (has_scale) o.scale = scale;
  return o;
}

}  // namespace isolation
