#include "politeproxy/base/keyed_hash.hpp"

#include <bit>
#include <cstring>
#include <chrono>
#include <exception>
#include <random>

#include <sys/random.h>
#include <unistd.h>

namespace politeproxy {

namespace {

struct sip_state {
    std::uint64_t v0, v1, v2, v3;

    explicit sip_state(const sip_key& k)
        : v0(k.k0 ^ 0x736f6d6570736575ull),
          v1(k.k1 ^ 0x646f72616e646f6dull),
          v2(k.k0 ^ 0x6c7967656e657261ull),
          v3(k.k1 ^ 0x7465646279746573ull) {}

    void round() {
        v0 += v1, v1 = std::rotl(v1, 13), v1 ^= v0, v0 = std::rotl(v0, 32);
        v2 += v3, v3 = std::rotl(v3, 16), v3 ^= v2;
        v0 += v3, v3 = std::rotl(v3, 21), v3 ^= v0;
        v2 += v1, v1 = std::rotl(v1, 17), v1 ^= v2, v2 = std::rotl(v2, 32);
    }

    template <int C>
    void absorb(std::uint64_t m) {
        v3 ^= m;
        for (int i = 0; i < C; ++i) round();
        v0 ^= m;
    }
};

std::uint64_t little_endian_word(const char* p, std::size_t n) {  // n <= 8
    std::uint64_t w = 0;
    if (n > 0) std::memcpy(&w, p, n);  // p may be null with n 0 (an empty view)
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    return w;
}

sip_key drawn_key() {
    sip_key k;
    std::uint64_t words[2];
    if (::getrandom(words, sizeof words, 0) == static_cast<ssize_t>(sizeof words)) {
        k.k0 = words[0], k.k1 = words[1];
        return k;
    }
    try {  // no getrandom (an old kernel, a filter): the C++ library's source
        std::random_device rd;
        k.k0 = std::uint64_t{rd()} << 32 | rd(), k.k1 = std::uint64_t{rd()} << 32 | rd();
    } catch (const std::exception&) {  // none either: the time and an address, better than a known key
        k.k0 = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        k.k1 = reinterpret_cast<std::uintptr_t>(&k) ^ static_cast<std::uint64_t>(::getpid()) << 32;
    }
    return k;
}

}  // namespace

template <int C, int D>
std::uint64_t sip_hash(const sip_key& key, std::string_view bytes) noexcept {
    sip_state s(key);
    const char* p = bytes.data();
    const std::size_t words = bytes.size() / 8;
    for (std::size_t i = 0; i < words; ++i, p += 8) s.absorb<C>(little_endian_word(p, 8));
    s.absorb<C>(std::uint64_t{bytes.size()} << 56 | little_endian_word(p, bytes.size() % 8));
    s.v2 ^= 0xff;
    for (int i = 0; i < D; ++i) s.round();
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

template std::uint64_t sip_hash<1, 3>(const sip_key&, std::string_view) noexcept;
template std::uint64_t sip_hash<2, 4>(const sip_key&, std::string_view) noexcept;

std::uint64_t keyed_hash(std::string_view bytes) noexcept {
    static const sip_key key = drawn_key();
    return sip_hash<1, 3>(key, bytes);
}

}  // namespace politeproxy
