#include "politeproxy/fleet/lease_scripts.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace politeproxy::fleet {
namespace {

lua_script make(std::string body) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    EVP_Digest(body.data(), body.size(), digest, &size, EVP_sha1(), nullptr);
    std::string hex;
    char byte[3];
    for (unsigned i = 0; i < size; ++i) {
        std::snprintf(byte, sizeof byte, "%02x", digest[i]);
        hex += byte;
    }
    return {std::move(body), std::move(hex)};
}

// Store time in milliseconds.
constexpr const char* store_now = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
)lua";

bool integers(const redis_reply& r, std::size_t n) {
    if (r.type != redis_reply::kind::array || r.elements.size() != n) return false;
    for (const auto& e : r.elements)
        if (e.type != redis_reply::kind::integer) return false;
    return true;
}

// What a store's figures are clamped to (a broken or hostile store cannot overflow a
// count or a time point).
constexpr long long most_count = 1'000'000'000;
constexpr long long longest_wait_ms = 30LL * 24 * 3600 * 1000;

std::size_t count(long long n, long long least = 0) { return static_cast<std::size_t>(std::clamp(n, least, most_count)); }

clock::duration wait(long long ms) { return std::chrono::milliseconds(std::clamp(ms, 0LL, longest_wait_ms)); }

}  // namespace

std::optional<lease_answer> read_acquire_reply(const redis_reply& r) {
    if (!integers(r, 7)) return std::nullopt;
    const auto& e = r.elements;
    lease_answer a;
    a.granted = count(e[0].integer);
    a.what = a.granted > 0 ? lease_answer::result::granted : lease_answer::result::refused;
    a.held = count(e[1].integer);
    a.limit = count(e[2].integer, 1);
    a.rate = static_cast<double>(std::max(0LL, e[3].integer)) / 1e6;  // micro-tokens per second
    a.paused_for = wait(e[4].integer);
    a.token_in = wait(e[5].integer);
    a.spares = count(e[6].integer);
    return a;
}

std::optional<renew_answer> read_renew_reply(const redis_reply& r) {
    if (!integers(r, 2)) return std::nullopt;
    return renew_answer{count(r.elements[0].integer), count(r.elements[1].integer)};
}

// Leases given back: KEYS[first_key..last_key] with ARGV from first_arg on, one member
// each; a run of one key's in one ZREM. Inline, not a function: the common acquire
// carries one or none, and every Lua step counts (a script's Redis CPU is the fleet's
// cost per request).
std::string remove_given(int first_key, int first_arg, const std::string& last_key) {
    return "local i = " + std::to_string(first_key) + "\n" + "local shift = " + std::to_string(first_arg - first_key) +
           "\n" + "local last = " + last_key + "\n" + R"lua(while i <= last do
  local key = KEYS[i]
  local j = i
  while j < last and KEYS[j + 1] == key do j = j + 1 end
  redis.call('ZREM', key, unpack(ARGV, i + shift, j + shift))
  i = j + 1
end
)lua";
}

// Spare tokens a process did not use, given back to a bucket: `ms` of its time.
constexpr const char* refund_tat = R"lua(
local function refund(state, ms)
  local t = tonumber(redis.call('HGET', state, 'tat'))
  if t then redis.call('HSET', state, 'tat', string.format('%.3f', t - ms)) end
end
)lua";

const lua_script& acquire_script() {
    static const lua_script s = make(std::string(store_now) + refund_tat + remove_given(5, 10, "#KEYS") + R"lua(
local given = #KEYS - 4
local first = 10 + given
local want = #ARGV - first + 1
if tonumber(ARGV[9]) > 0 then refund(KEYS[2], tonumber(ARGV[9])) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local waiting = redis.call('ZCARD', KEYS[3])
if waiting > 0 then
  local stale = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now - tonumber(ARGV[7]))
  if #stale > 0 then
    redis.call('ZREM', KEYS[3], unpack(stale))
    redis.call('ZREM', KEYS[4], unpack(stale))
    waiting = redis.call('ZCARD', KEYS[3])
  end
end
local s = redis.call('HMGET', KEYS[2], 'limit', 'rate', 'pause_until', 'tat')
local limit = tonumber(s[1]) or tonumber(ARGV[2])
local rate = tonumber(s[2]) or tonumber(ARGV[3])
local held = redis.call('ZCARD', KEYS[1])
local micro = math.floor(rate * 1000000 + 0.5)
local function refuse(pause, wait)
  redis.call('ZADD', KEYS[3], 'NX', now, ARGV[6])
  redis.call('ZADD', KEYS[4], now, ARGV[6])
  redis.call('PEXPIRE', KEYS[3], ARGV[7])
  redis.call('PEXPIRE', KEYS[4], ARGV[7])
  return {0, held, limit, micro, pause, wait, 0}
end
if want < 1 then return {0, held, limit, micro, 0, 0, 0} end
local pause = (tonumber(s[3]) or 0) - now
if pause > 0 then return refuse(pause, 0) end
local free = limit - held
if free <= 0 then return refuse(0, 0) end
local rank = nil
local ahead = 0
if waiting > 0 then
  rank = redis.call('ZRANK', KEYS[3], ARGV[6])
  ahead = rank or waiting
  if ahead >= free then return refuse(0, 0) end
end
local n = math.min(want, free - ahead)
local interval = 1000 / rate
local tat = math.max(tonumber(s[4]) or now, now)
local allowance = (tonumber(ARGV[4]) - 1) * interval
local granted = 0
local wait = 0
while granted < n do
  wait = tat - allowance - now
  if wait > 0 then break end
  tat = tat + interval
  granted = granted + 1
end
if granted == 0 then return refuse(0, math.ceil(wait)) end
local spares = 0
if waiting - (rank and 1 or 0) <= 0 then
  local most = tonumber(ARGV[8]) * granted
  while spares < most and tat - allowance - now <= 0 do
    tat = tat + interval
    spares = spares + 1
  end
end
redis.call('HSET', KEYS[2], 'tat', string.format('%.3f', tat))
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[2], ARGV[5]) end
local expiry = now + tonumber(ARGV[1])
if granted == 1 then
  redis.call('ZADD', KEYS[1], expiry, ARGV[first])
else
  local scored = {}
  for k = 0, granted - 1 do
    scored[2 * k + 1] = expiry
    scored[2 * k + 2] = ARGV[first + k]
  end
  redis.call('ZADD', KEYS[1], unpack(scored))
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) + 1000)
if rank then
  redis.call('ZREM', KEYS[3], ARGV[6])
  redis.call('ZREM', KEYS[4], ARGV[6])
end
wait = math.max(0, tat - allowance - now)
return {granted, held + granted, limit, micro, 0, math.ceil(wait), spares}
)lua");
    return s;
}

const lua_script& renew_script() {
    static const lua_script s = make(std::string(store_now) + R"lua(
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local ttl = tonumber(ARGV[1])
local added = 0
for i = 2, #ARGV do
  added = added + redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ttl + 1000)
return {added, redis.call('ZCARD', KEYS[1])}
)lua");
    return s;
}

const lua_script& release_script() {
    static const lua_script s = make(std::string(refund_tat) + "local n = tonumber(ARGV[1])\n" + remove_given(1, 2, "n") + R"lua(
for k = n + 1, #KEYS do refund(KEYS[k], tonumber(ARGV[k + 1])) end
return n
)lua");
    return s;
}

const lua_script& publish_script() {
    static const lua_script s = make(std::string(store_now) + R"lua(
redis.call('HSET', KEYS[1], 'limit', ARGV[1], 'rate', ARGV[2])
local ttl = tonumber(ARGV[4])
local pause = tonumber(ARGV[3])
if pause > 0 then
  local until_ms = now + pause
  if until_ms > (tonumber(redis.call('HGET', KEYS[1], 'pause_until')) or 0) then
    redis.call('HSET', KEYS[1], 'pause_until', until_ms)
  end
  ttl = math.max(ttl, pause + 1000)
end
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
)lua");
    return s;
}

const lua_script& withdraw_script() {
    static const lua_script s = make(R"lua(
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
)lua");
    return s;
}

std::string leases_key(std::string_view key) {
    std::string out = "pp:{";
    out.append(key);
    out += "}:leases";
    return out;
}

host_keys::host_keys(std::string_view key) {
    const std::string tagged = "pp:{" + std::string(key) + "}:";
    leases = tagged + "leases";
    state = tagged + "state";
    waiters = tagged + "waiters";
    polled = tagged + "polled";
}

}  // namespace politeproxy::fleet
