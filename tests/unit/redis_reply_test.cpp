// The Redis protocol half without a server: commands formatted, replies read in pieces,
// a store's hostile bytes refused, and the scripts' replies read with their figures clamped.
#include "politeproxy/fleet/cluster_slots.hpp"
#include "politeproxy/fleet/lease_scripts.hpp"
#include "politeproxy/fleet/redis_reply.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <climits>
#include <string>

using namespace politeproxy;
using namespace politeproxy::fleet;
using status = redis_reply_reader::status;

namespace {

redis_reply integers(std::initializer_list<long long> values) {
    redis_reply r;
    r.type = redis_reply::kind::array;
    for (auto v : values) r.elements.push_back({redis_reply::kind::integer, v, {}, {}});
    return r;
}

}  // namespace

TEST_CASE("a command is formatted as a RESP array of bulk strings") {
    CHECK(redis_command({"ZREM", "pp:{a}:leases", "x"}) == "*3\r\n$4\r\nZREM\r\n$13\r\npp:{a}:leases\r\n$1\r\nx\r\n");
    // Binary-safe: lengths are counted, a NUL is one more byte.
    const std::string with_nul = redis_command({"SET", std::string_view("a\0b", 3)});
    CHECK(with_nul == std::string("*2\r\n$3\r\nSET\r\n$3\r\na\0b\r\n", 22));
}

TEST_CASE("replies split anywhere come out whole, in order") {
    const std::string wire = "*2\r\n:1\r\n$5\r\nhello\r\n+OK\r\n-NOSCRIPT No matching script\r\n";
    for (std::size_t cut = 0; cut <= wire.size(); ++cut) {
        redis_reply_reader reader;
        redis_reply r;
        REQUIRE(reader.feed(std::string_view(wire).substr(0, cut)));
        int seen = 0;
        auto drain = [&] {
            for (status s; (s = reader.next(r)) == status::reply; ++seen) {
                if (seen == 0) {
                    REQUIRE(r.type == redis_reply::kind::array);
                    REQUIRE(r.elements.size() == 2);
                    CHECK(r.elements[0].integer == 1);
                    CHECK(r.elements[1].text == "hello");
                } else if (seen == 1) {
                    CHECK(r.type == redis_reply::kind::status);
                } else {
                    CHECK(r.is_error());
                    CHECK(r.text.starts_with("NOSCRIPT"));
                }
            }
        };
        drain();
        REQUIRE(reader.feed(std::string_view(wire).substr(cut)));
        drain();
        CHECK(seen == 3);
        CHECK(reader.next(r) == status::need_more);
    }
}

TEST_CASE("a store's garbage or oversized reply breaks the reader, for good") {
    SUBCASE("not the protocol") {
        redis_reply_reader reader;
        redis_reply r;
        reader.feed("?what\r\n");
        CHECK(reader.next(r) == status::broken);
        CHECK_FALSE(reader.feed("+OK\r\n"));
        reader.reset();
        REQUIRE(reader.feed("+OK\r\n"));
        CHECK(reader.next(r) == status::reply);
    }
    SUBCASE("a bulk string announced as a gigabyte is not buffered past the bound") {
        redis_reply_reader reader(4096);
        redis_reply r;
        REQUIRE(reader.feed("$1000000000\r\n"));
        const std::string chunk(1024, 'x');
        int fed = 0;
        while (reader.feed(chunk) && fed < 100) ++fed;
        CHECK(fed < 5);
        CHECK(reader.next(r) == status::broken);
    }
    SUBCASE("an array announced with a billion elements is refused before any allocation") {
        redis_reply_reader reader;
        redis_reply r;
        reader.feed("*1000000000\r\n");
        CHECK(reader.next(r) == status::broken);
        reader.reset();
        reader.feed("*16385\r\n");
        CHECK(reader.next(r) == status::broken);
        reader.reset();  // nested: 64 at most
        reader.feed("*1\r\n*65\r\n");
        CHECK(reader.next(r) == status::broken);
        reader.reset();  // a slot map's top level: a range per slot
        reader.feed("*16384\r\n");
        CHECK(reader.next(r) == status::need_more);
        redis_reply_reader negative;
        negative.feed("*-7\r\n");
        CHECK(negative.next(r) == status::broken);
        redis_reply_reader fine;
        fine.feed("*-1\r\n*0\r\n");
        CHECK(fine.next(r) == status::reply);
        CHECK(r.type == redis_reply::kind::nil);
        CHECK(fine.next(r) == status::reply);
        CHECK((r.type == redis_reply::kind::array && r.elements.empty()));
    }
    SUBCASE("nested arrays of strings, each small, are bounded as one reply") {
        redis_reply_reader reader(8192);
        redis_reply r;
        REQUIRE(reader.feed("*64\r\n"));
        const std::string element = "$1000\r\n" + std::string(1000, 'x') + "\r\n";
        int fed = 0;
        while (fed < 64 && reader.feed(element)) ++fed;
        CHECK(fed < 10);
        CHECK(reader.next(r) == status::broken);
    }
    SUBCASE("many small replies in a row are not one big one") {
        redis_reply_reader reader(64);
        redis_reply r;
        for (int i = 0; i < 1000; ++i) {
            REQUIRE(reader.feed(":12345\r\n"));
            REQUIRE(reader.next(r) == status::reply);
        }
    }
    SUBCASE("nesting deeper than the reader allows") {
        redis_reply_reader reader;
        redis_reply r;
        std::string deep;
        for (int i = 0; i < 64; ++i) deep += "*1\r\n";
        reader.feed(deep + ":1\r\n");
        CHECK(reader.next(r) == status::broken);
    }
}

TEST_CASE("the acquire reply is read with its figures clamped") {
    auto a = read_acquire_reply(integers({1, 3, 4, 2'500'000, 0, 0, 8}));
    REQUIRE(a);
    CHECK(a->spares == 8);
    CHECK(a->what == lease_answer::result::granted);
    CHECK(a->held == 3);
    CHECK(a->limit == 4);
    CHECK(a->rate == doctest::Approx(2.5));
    CHECK(a->lease == 0);

    a = read_acquire_reply(integers({0, -5, -1, -7, LLONG_MAX, LLONG_MIN, -3}));
    REQUIRE(a);
    CHECK(a->what == lease_answer::result::refused);
    CHECK(a->held == 0);
    CHECK(a->limit == 1);
    CHECK(a->rate == 0);
    CHECK(a->paused_for == std::chrono::hours(24 * 30));
    CHECK(a->token_in == clock::duration::zero());
    CHECK(a->spares == 0);
    // A time point that far ahead does not overflow.
    CHECK(clock::now() + a->paused_for > clock::now());

    CHECK_FALSE(read_acquire_reply(integers({1, 1, 1, 1, 1, 1})));
    auto not_integers = integers({1, 1, 1, 1, 1, 1, 1});
    not_integers.elements[3].type = redis_reply::kind::string;
    CHECK_FALSE(read_acquire_reply(not_integers));
    redis_reply error;
    error.type = redis_reply::kind::error;
    CHECK_FALSE(read_acquire_reply(error));
}

TEST_CASE("the renew reply is read with its counts clamped") {
    auto r = read_renew_reply(integers({2, 5}));
    REQUIRE(r);
    CHECK(r->lost == 2);
    CHECK(r->held == 5);
    r = read_renew_reply(integers({-1, LLONG_MAX}));
    REQUIRE(r);
    CHECK(r->lost == 0);
    CHECK(r->held == 1'000'000'000);
    CHECK_FALSE(read_renew_reply(integers({1})));
}

namespace {

redis_reply text(std::string s, redis_reply::kind k = redis_reply::kind::string) {
    redis_reply r;
    r.type = k;
    r.text = std::move(s);
    return r;
}

redis_reply number(long long n) {
    redis_reply r;
    r.type = redis_reply::kind::integer;
    r.integer = n;
    return r;
}

redis_reply array(std::vector<redis_reply> elements) {
    redis_reply r;
    r.type = redis_reply::kind::array;
    r.elements = std::move(elements);
    return r;
}

}  // namespace

TEST_CASE("Redis Cluster: a key's slot is CRC16 of its hash tag, as Redis computes it") {
    // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
    CHECK(key_slot("123456789") == (0x31C3 & 16383));
    CHECK(key_slot("foo") == 12182);
    CHECK(key_slot("{user1000}.following") == key_slot("{user1000}.followers"));
    CHECK(key_slot("{user1000}.following") == key_slot("user1000"));
    CHECK(key_slot("foo{}{bar}") == key_slot("foo{}{bar}"));  // an empty tag: the whole key
    CHECK(key_slot("foo{}{bar}") != key_slot("bar"));
    CHECK(key_slot("foo{{bar}}zap") == key_slot("{bar"));
    CHECK(key_slot("foo{bar}{zap}") == key_slot("bar"));
    // Every key of a host is on the slot tag_slot() names without building them.
    for (const char* host : {"example.com", "a.b.c.example.org", "10.0.0.1", "2001:db8::1", "x"}) {
        const host_keys k(host);
        CHECK(tag_slot(host) == key_slot(k.leases));
        CHECK(key_slot(k.state) == key_slot(k.leases));
        CHECK(key_slot(k.waiters) == key_slot(k.polled));
    }
    CHECK(tag_slot("}odd") == key_slot("pp:{}odd}:x"));
}

TEST_CASE("Redis Cluster: CLUSTER SLOTS read into ranges, a malformed map refused") {
    const node_address asked{"10.0.0.9", 7000};
    auto node = [](std::string host, long long port) { return array({text(std::move(host)), number(port), text("id")}); };
    const auto map = array({array({number(0), number(5460), node("10.0.0.1", 7000), node("10.0.0.4", 7003)}),
                            array({number(5461), number(16383), node("?", 7001)})});
    const auto ranges = read_cluster_slots(map, asked);
    REQUIRE(ranges);
    REQUIRE(ranges->size() == 2);
    CHECK((*ranges)[0].first == 0);
    CHECK((*ranges)[0].last == 5460);
    CHECK((*ranges)[0].master == node_address{"10.0.0.1", 7000});
    CHECK((*ranges)[1].master == node_address{"10.0.0.9", 7001});  // unknown address: the node asked
    CHECK_FALSE(read_cluster_slots(array({array({number(0), number(16384), node("a", 1)})}), asked));
    CHECK_FALSE(read_cluster_slots(array({array({number(9), number(3), node("a", 1)})}), asked));
    CHECK_FALSE(read_cluster_slots(array({array({number(0), number(3), node("a", 0)})}), asked));
    CHECK_FALSE(read_cluster_slots(array({array({number(0), number(3)})}), asked));
    CHECK_FALSE(read_cluster_slots(text("ERR This instance has cluster support disabled", redis_reply::kind::error), asked));
    CHECK(read_cluster_slots(array({}), asked)->empty());
    CHECK_FALSE(read_cluster_slots(array({array({number(0), number(16383), node("a", 1)}),
                                          array({number(0), number(0), node("b", 1)})}),
                                   asked));  // more slots than a cluster has: overlapping

}

TEST_CASE("Redis Cluster: MOVED and ASK read; anything else is not a redirection") {
    const node_address asked{"10.0.0.9", 7000};
    auto moved = read_redirection("MOVED 3999 127.0.0.1:6381", asked);
    REQUIRE(moved);
    CHECK(moved->moved);
    CHECK(moved->slot == 3999);
    CHECK(moved->to == node_address{"127.0.0.1", 6381});
    auto ask = read_redirection("ASK 16383 ::1:7002", asked);
    REQUIRE(ask);
    CHECK_FALSE(ask->moved);
    CHECK(ask->to == node_address{"::1", 7002});
    CHECK(read_redirection("MOVED 1 :7005", asked)->to == node_address{"10.0.0.9", 7005});  // the same host
    CHECK_FALSE(read_redirection("MOVED 16384 a:1", asked));
    CHECK_FALSE(read_redirection("MOVED 1 a:0", asked));
    CHECK_FALSE(read_redirection("MOVED 1", asked));
    CHECK_FALSE(read_redirection("ASK x a:1", asked));
    CHECK_FALSE(read_redirection("ERR unknown command", asked));
    CHECK(is_try_again("TRYAGAIN Multiple keys request during rehashing of slot"));
    CHECK(is_cluster_down("CLUSTERDOWN Hash slot not served"));
    CHECK_FALSE(is_try_again("ERR"));
}
