#pragma once
#include <chrono>

namespace politeproxy {

/// The one clock policy code reasons in. Policy classes take `clock::time_point now`
/// as an argument and never read the clock themselves, so tests move time by hand.
using clock = std::chrono::steady_clock;

}  // namespace politeproxy
