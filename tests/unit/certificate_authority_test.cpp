// The local CA of tls.mode intercept: what --gen-ca writes, what the loader refuses, and
// the leaves it mints, checked with OpenSSL's own verifier. Time is passed in (no
// sleeps); files go to a fresh temporary directory.
#include "politeproxy/tls/certificate_authority.hpp"

#include <doctest/doctest.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <sys/stat.h>

using namespace politeproxy::tls;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
    fs::path path;
    temp_dir() {
        std::string templ = (fs::temp_directory_path() / "pp-ca-XXXXXX").string();
        REQUIRE(::mkdtemp(templ.data()));
        path = templ;
    }
    ~temp_dir() { fs::remove_all(path); }
    std::string operator/(const char* name) const { return (path / name).string(); }
};

certificate_authority make_ca(const temp_dir& d) {
    REQUIRE_FALSE(generate_ca(d.path.string(), "testhost"));
    auto ca = certificate_authority::load(d / "ca.pem", d / "ca.key");
    REQUIRE_MESSAGE(ca.has_value(), (ca ? "" : ca.error()));
    return std::move(*ca);
}

// OpenSSL's verdict on `leaf` against `ca` alone, for `host` (a DNS name or an IP).
int verify(X509* ca, X509* leaf, const std::string& host, std::time_t at) {
    X509_STORE* store = X509_STORE_new();
    X509_STORE_add_cert(store, ca);
    X509_STORE_CTX* ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, store, leaf, nullptr);
    X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
    X509_VERIFY_PARAM_set_time(param, at);
    X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
    const int ok = X509_verify_cert(ctx);
    const int err = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return err;
}

std::time_t seconds(system_time t) { return std::chrono::system_clock::to_time_t(t); }

}  // namespace

TEST_CASE("--gen-ca writes a P-256 CA with pathlen 0, a 0600 key, and never overwrites") {
    temp_dir d;
    REQUIRE_FALSE(generate_ca(d.path.string(), "crawler-7"));
    struct stat st;
    REQUIRE(::stat((d / "ca.key").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);

    auto ca = certificate_authority::load(d / "ca.pem", d / "ca.key");
    REQUIRE(ca.has_value());
    X509* cert = ca->certificate();
    CHECK(X509_check_ca(cert) >= 1);
    CHECK(X509_get_pathlen(cert) == 0);
    char cn[128] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    CHECK(std::string(cn) == "politeproxy CA on crawler-7");
    CHECK(EVP_PKEY_get_bits(X509_get0_pubkey(cert)) == 256);

    const auto again = generate_ca(d.path.string(), "crawler-7");
    REQUIRE(again);
    CHECK(again->find("exists") != std::string::npos);
}

TEST_CASE("the loader refuses a world-readable key, a key of another CA, and a leaf as CA") {
    temp_dir a, b;
    const certificate_authority ca = make_ca(a);
    make_ca(b);

    fs::permissions(a / "ca.key", fs::perms::others_read, fs::perm_options::add);
    auto r = certificate_authority::load(a / "ca.pem", a / "ca.key");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().find("readable by every user") != std::string::npos);
    CHECK(r.error().find(a / "ca.key") != std::string::npos);
    fs::permissions(a / "ca.key", fs::perms::others_read, fs::perm_options::remove);

    r = certificate_authority::load(a / "ca.pem", b / "ca.key");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().find("does not match") != std::string::npos);

    r = certificate_authority::load(a / "missing.pem", a / "ca.key");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().find("missing.pem") != std::string::npos);

    // A leaf the CA signed is not a CA.
    const leaf l = ca.mint("leaf.test", std::chrono::system_clock::now(), 24h);
    {
        FILE* f = std::fopen((a / "leaf.pem").c_str(), "w");
        PEM_write_X509(f, l.cert.get());
        std::fclose(f);
    }
    r = certificate_authority::load(a / "leaf.pem", a / "ca.key");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().find("not a CA") != std::string::npos);
}

TEST_CASE("a minted leaf verifies against the CA for its name only, as a server certificate") {
    temp_dir d;
    const certificate_authority ca = make_ca(d);
    const auto now = std::chrono::system_clock::now();
    const leaf l = ca.mint("www.example.test", now, 30 * 24h);
    X509* cert = l.cert.get();

    CHECK(verify(ca.certificate(), cert, "www.example.test", seconds(now)) == X509_V_OK);
    CHECK(verify(ca.certificate(), cert, "other.example.test", seconds(now)) == X509_V_ERR_HOSTNAME_MISMATCH);
    CHECK(verify(ca.certificate(), cert, "www.example.test", seconds(now + 31 * 24h)) == X509_V_ERR_CERT_HAS_EXPIRED);
    CHECK(X509_check_ca(cert) == 0);
    CHECK((X509_get_key_usage(cert) & KU_DIGITAL_SIGNATURE) != 0);
    CHECK((X509_get_extended_key_usage(cert) & XKU_SSL_SERVER) != 0);
    CHECK(EVP_PKEY_get_base_id(l.key.get()) == EVP_PKEY_EC);
    CHECK(EVP_PKEY_get_bits(l.key.get()) == 256);
    CHECK(X509_check_private_key(cert, l.key.get()) == 1);
    CHECK(l.not_after <= now + 30 * 24h);
    CHECK(l.not_after > now + 29 * 24h);
}

TEST_CASE("an IP literal gets an IP SAN; a name with a comma is one DNS name, not two") {
    temp_dir d;
    const certificate_authority ca = make_ca(d);
    const auto now = std::chrono::system_clock::now();
    CHECK(verify(ca.certificate(), ca.mint("127.0.0.1", now, 24h).cert.get(), "127.0.0.1", seconds(now)) == X509_V_OK);
    CHECK(verify(ca.certificate(), ca.mint("::1", now, 24h).cert.get(), "::1", seconds(now)) == X509_V_OK);
    const leaf odd = ca.mint("a.test,IP:10.0.0.1", now, 24h);
    CHECK(verify(ca.certificate(), odd.cert.get(), "10.0.0.1", seconds(now)) != X509_V_OK);
    CHECK(verify(ca.certificate(), odd.cert.get(), "a.test", seconds(now)) != X509_V_OK);
}

TEST_CASE("leaf cache: one mint per name, hits after, re-minted before expiry, LRU bound") {
    temp_dir d;
    leaf_cache cache(make_ca(d), 3, 24h);
    const auto t0 = std::chrono::system_clock::now();

    const leaf first = cache.get("a.test", t0);
    CHECK(cache.get("a.test", t0 + 1h).cert == first.cert);
    CHECK(cache.totals().minted == 1);
    CHECK(cache.totals().cached == 1);

    // With less than a quarter of its lifetime left, a leaf is replaced.
    const leaf later = cache.get("a.test", t0 + 19h);
    CHECK(later.cert != first.cert);
    CHECK(cache.totals().minted == 2);

    for (const char* n : {"b.test", "c.test", "d.test"}) cache.get(n, t0 + 19h);
    CHECK(cache.size() == 3);  // a.test, least recently used, is gone
    cache.get("a.test", t0 + 19h);
    CHECK(cache.totals().minted == 6);
}

TEST_CASE("leaf cache: 50 threads asking for one new name at once mint one leaf") {
    temp_dir d;
    leaf_cache cache(make_ca(d), 100, 24h);
    const auto now = std::chrono::system_clock::now();
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    std::vector<X509*> got(50);
    for (int i = 0; i < 50; ++i)
        threads.emplace_back([&, i] {
            while (!go) std::this_thread::yield();
            got[i] = cache.get("busy.test", now).cert.get();
        });
    go = true;
    for (auto& t : threads) t.join();
    CHECK(cache.totals().minted == 1);
    CHECK(cache.totals().cached == 49);
    for (X509* c : got) CHECK(c == got[0]);
}

TEST_CASE("leaf cache: 10,000 names stay within the bound") {
    temp_dir d;
    leaf_cache cache(make_ca(d), 1000, 24h);
    const auto now = std::chrono::system_clock::now();
    for (int i = 0; i < 10000; ++i) cache.get("h" + std::to_string(i) + ".test", now);
    CHECK(cache.size() == 1000);
    CHECK(cache.totals().minted == 10000);
    cache.get("h9999.test", now);  // the most recent are kept
    CHECK(cache.totals().cached == 1);
}
