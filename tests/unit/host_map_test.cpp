// host_map: the host table's open-addressing map, against std::map as the model.
#include "politeproxy/exchange/host_map.hpp"
#include "politeproxy/exchange/host_table.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace politeproxy;

namespace {

std::shared_ptr<host_entry> entry(const std::string& key) {
    static const auto policy = std::make_shared<const host_policy>();
    return std::make_shared<host_entry>(key, policy, nullptr, clock::time_point{});
}

}  // namespace

TEST_CASE("find, insert and extract agree with a model through growth and erased slots") {
    host_map map;
    std::map<std::string, host_entry*> model;
    std::minstd_rand random(7);
    for (int step = 0; step < 200000; ++step) {
        const std::string key = "h" + std::to_string(random() % 5000) + ".test";
        const auto* found = map.find(key);
        const auto it = model.find(key);
        REQUIRE((found != nullptr) == (it != model.end()));
        if (found) {
            CHECK((*found)->key == key);
            CHECK(found->get() == it->second);
        }
        if (random() % 3 == 0) {  // erase about as often as the keys fill in
            if (found) {
                const auto out = map.extract(key);
                CHECK(out.get() == it->second);
                model.erase(it);
            } else {
                CHECK(map.extract(key) == nullptr);
            }
        } else if (!found) {
            auto e = entry(key);
            model[key] = e.get();
            map.insert(std::move(e));
        }
        REQUIRE(map.size() == model.size());
    }
    std::size_t seen = 0;
    map.for_each([&](host_entry& e) {
        CHECK(model.at(e.key) == &e);
        ++seen;
    });
    CHECK(seen == model.size());
    CHECK(map.size() * 4 <= map.slot_count() * 3);  // live entries fill at most 3/4 of the slots
}

TEST_CASE("extracting leaves every other entry in its slot; only an insert may lay the slots out again") {
    host_map map;
    for (int i = 0; i < 1000; ++i) map.insert(entry("k" + std::to_string(i)));
    const auto layout = map.layout();
    std::map<std::string, std::size_t> where;
    for (std::size_t i = 0; i < map.slot_count(); ++i)
        if (host_entry* e = map.at(i)) where[e->key] = i;
    REQUIRE(where.size() == 1000);
    for (int i = 0; i < 1000; i += 2) CHECK(map.extract_at(where.at("k" + std::to_string(i))) != nullptr);
    CHECK(map.extract_at(where.at("k0")) == nullptr);  // already out
    CHECK(map.layout() == layout);
    for (int i = 1; i < 1000; i += 2) {
        const auto* found = map.find("k" + std::to_string(i));  // found past the erased slots
        REQUIRE(found);
        CHECK(map.at(where.at("k" + std::to_string(i))) == found->get());
    }
    for (int i = 0; i < 1000; i += 2) CHECK(map.find("k" + std::to_string(i)) == nullptr);
    // Inserts reuse erased slots, and clear them all once they fill the table.
    for (int i = 0; i < 5000; ++i) map.insert(entry("new" + std::to_string(i)));
    CHECK(map.layout() != layout);
    CHECK(map.size() == 5500);
    for (int i = 1; i < 1000; i += 2) CHECK(map.find("k" + std::to_string(i)));
}

TEST_CASE("an empty map finds nothing and has no slots to pass over") {
    host_map map;
    CHECK(map.find("a.test") == nullptr);
    CHECK(map.extract("a.test") == nullptr);
    CHECK(map.slot_count() == 0);
    CHECK(map.size() == 0);
}

TEST_CASE("inserts and erases at a steady size clear the erased slots without growing the table") {
    host_map map;
    for (int i = 0; i < 100; ++i) map.insert(entry("k" + std::to_string(i)));
    const std::size_t slots = map.slot_count();
    const auto layout = map.layout();
    for (int i = 100; i < 5000; ++i) {  // one in, one out: the live count stays at 100
        map.insert(entry("k" + std::to_string(i)));
        REQUIRE(map.extract("k" + std::to_string(i - 100)));
    }
    CHECK(map.size() == 100);
    CHECK(map.slot_count() == slots);
    CHECK(map.layout() != layout);  // erased marks filled the table: laid out again, same size
    for (int i = 4900; i < 5000; ++i) CHECK(map.find("k" + std::to_string(i)));
}

TEST_CASE("shrink: a table left under 1/8 full is laid out again smaller, its entries kept") {
    host_map map;
    for (int i = 0; i < 4000; ++i) map.insert(entry("k" + std::to_string(i)));
    const std::size_t slots = map.slot_count();
    map.shrink();  // 4000 of 8192: nothing to do
    CHECK(map.slot_count() == slots);
    for (int i = 0; i < 4000; ++i)
        if (i % 50 != 0) map.extract("k" + std::to_string(i));
    REQUIRE(map.size() == 80);
    const auto layout = map.layout();
    map.shrink();
    CHECK(map.layout() != layout);
    CHECK(map.slot_count() == 512);  // the live entries at most 1/4 of the slots
    for (int i = 0; i < 4000; i += 50) CHECK(map.find("k" + std::to_string(i)));
    CHECK(map.find("k1") == nullptr);
}

TEST_CASE("slot arrays of 2 MiB and more lie in whole, aligned huge pages") {
    constexpr std::size_t huge = std::size_t{2} << 20;
    const std::size_t bytes = 3 * (std::size_t{1} << 20) + 12345;
    auto* p = static_cast<unsigned char*>(host_map_detail::allocate(bytes));
    CHECK(reinterpret_cast<std::uintptr_t>(p) % huge == 0);
    std::memset(p, 0xa5, 2 * huge);  // the whole mapped run is ours
    CHECK(p[2 * huge - 1] == 0xa5);
    host_map_detail::deallocate(p, bytes);
    void* small = host_map_detail::allocate(4096);  // under 2 MiB: operator new
    REQUIRE(small);
    host_map_detail::deallocate(small, 4096);
}

TEST_CASE("names chosen to share a slot under an unkeyed hash spread out (no hash flooding)") {
    // 1000 names that std::hash (MurmurHash, fixed seed: anyone can search offline)
    // would file in slot 0 of the 2048 slots 1000 entries take (host_map::home_in: the
    // top bits of the hash times 2^64/phi). Filed under it, they would lie in
    // one run of 1000 slots that every lookup among them walks.
    std::vector<std::string> names;
    for (std::uint64_t i = 0; names.size() < 1000; ++i) {
        std::string name = "n" + std::to_string(i) + ".flood.test";
        const std::uint64_t h = std::hash<std::string_view>{}(name);
        if (host_map::home_in(h, 2048) == 0) names.push_back(std::move(name));
    }
    host_map map;
    for (const auto& name : names) map.insert(entry(name));
    REQUIRE(map.slot_count() == 2048);
    std::size_t run = 0, longest = 0;  // consecutive filled slots (the table wraps around)
    for (std::size_t i = 0; i < 2 * map.slot_count(); ++i) {
        run = map.at(i % map.slot_count()) ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    CHECK(longest < 100);  // names spread at random: median 18, at most 35 in 300 simulated tables
    for (const auto& name : names) CHECK(map.find(name));
}
