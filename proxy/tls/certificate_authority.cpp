#include "politeproxy/tls/certificate_authority.hpp"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <optional>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace politeproxy::tls {

namespace {

constexpr auto ca_lifetime = std::chrono::hours(24 * 3650);
constexpr auto clock_skew = std::chrono::hours(1);

cert_ptr own(X509* x) { return cert_ptr(x, X509_free); }
key_ptr own(EVP_PKEY* k) { return key_ptr(k, EVP_PKEY_free); }

// OpenSSL's last error as text, for messages (and the error queue emptied).
std::string openssl_error() {
    const unsigned long e = ERR_get_error();
    ERR_clear_error();
    if (e == 0) return "unknown OpenSSL error";
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    return text;
}

[[noreturn]] void fail(const char* what) { throw std::runtime_error(std::string(what) + ": " + openssl_error()); }

key_ptr new_p256_key() {
    EVP_PKEY* k = EVP_EC_gen("P-256");
    if (!k) fail("EC key generation");
    return own(k);
}

void set_random_serial(X509* x) {
    unsigned char bytes[16];
    if (RAND_bytes(bytes, sizeof bytes) != 1) fail("random serial");
    bytes[0] &= 0x7f;  // positive
    bytes[0] |= 0x01;  // and never zero
    std::unique_ptr<BIGNUM, decltype(&BN_free)> bn(BN_bin2bn(bytes, sizeof bytes, nullptr), BN_free);
    if (!bn || !BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(x))) fail("serial number");
}

void set_validity(X509* x, system_time from, system_time until) {
    const auto secs = [](system_time t) { return static_cast<time_t>(std::chrono::system_clock::to_time_t(t)); };
    if (!ASN1_TIME_set(X509_getm_notBefore(x), secs(from)) || !ASN1_TIME_set(X509_getm_notAfter(x), secs(until)))
        fail("validity");
}

void add_text_extension(X509* x, X509* issuer, int nid, const char* value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    if (!ext) fail("certificate extension");
    const int ok = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    if (!ok) fail("certificate extension");
}

// The name as a subjectAltName entry: an IP address when it parses as one, else DNS.
// Built from the name's bytes, never from a config string ("DNS:a,IP:b" would inject).
void add_subject_alt_name(X509* x, std::string_view name) {
    GENERAL_NAMES* names = sk_GENERAL_NAME_new_null();
    GENERAL_NAME* gn = GENERAL_NAME_new();
    if (!names || !gn) fail("subjectAltName");
    const std::string text(name);
    if (ASN1_OCTET_STRING* ip = a2i_IPADDRESS(text.c_str())) {
        GENERAL_NAME_set0_value(gn, GEN_IPADD, ip);
    } else {
        ERR_clear_error();
        ASN1_IA5STRING* dns = ASN1_IA5STRING_new();
        if (!dns || !ASN1_STRING_set(dns, text.data(), static_cast<int>(text.size()))) fail("subjectAltName");
        GENERAL_NAME_set0_value(gn, GEN_DNS, dns);
    }
    sk_GENERAL_NAME_push(names, gn);
    const int ok = X509_add1_ext_i2d(x, NID_subject_alt_name, names, 0, X509V3_ADD_DEFAULT);
    GENERAL_NAMES_free(names);
    if (ok != 1) fail("subjectAltName");
}

void set_name(X509_NAME* n, std::string_view common_name) {
    // A CN holds at most 64 characters; the SAN carries the full name.
    const std::string cn(common_name.substr(0, 64));
    if (!X509_NAME_add_entry_by_txt(n, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("politeproxy"), -1,
                                    -1, 0) ||
        !X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1,
                                    -1, 0))
        fail("certificate name");
}

system_time not_after_of(X509* x) {
    std::tm tm{};
    if (!ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm)) return system_time{};
    return std::chrono::system_clock::from_time_t(timegm(&tm));
}

// Writes `pem` to a new file (never an existing one) with `mode`.
std::optional<std::string> write_new_file(const std::string& path, mode_t mode,
                                          const std::function<bool(BIO*)>& write) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return path + ": " + std::strerror(errno);
    ::fchmod(fd, mode);  // whatever the umask
    FILE* f = ::fdopen(fd, "w");
    if (!f) {
        ::close(fd);
        return path + ": " + std::strerror(errno);
    }
    BIO* bio = BIO_new_fp(f, BIO_CLOSE);
    const bool ok = bio && write(bio) && BIO_flush(bio) == 1;
    if (bio)
        BIO_free(bio);
    else
        std::fclose(f);
    if (!ok) return path + ": " + openssl_error();
    return std::nullopt;
}

}  // namespace

std::optional<std::string> generate_ca(const std::string& dir, std::string_view host) {
    const std::string cert_path = dir + "/ca.pem";
    const std::string key_path = dir + "/ca.key";
    for (const auto& p : {cert_path, key_path}) {
        struct stat st;
        if (::stat(p.c_str(), &st) == 0) return p + " exists; remove it first or choose another directory";
    }
    try {
        const key_ptr key = new_p256_key();
        const cert_ptr cert = own(X509_new());
        if (!cert || !X509_set_version(cert.get(), 2)) fail("certificate");
        set_random_serial(cert.get());
        const auto now = std::chrono::system_clock::now();
        set_validity(cert.get(), now - clock_skew, now + ca_lifetime);
        set_name(X509_get_subject_name(cert.get()), "politeproxy CA on " + std::string(host));
        X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
        if (!X509_set_pubkey(cert.get(), key.get())) fail("public key");
        add_text_extension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
        add_text_extension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
        add_text_extension(cert.get(), cert.get(), NID_subject_key_identifier, "hash");
        if (!X509_sign(cert.get(), key.get(), EVP_sha256())) fail("signing");
        if (auto e = write_new_file(key_path, 0600, [&](BIO* b) {
                return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
            }))
            return e;
        if (auto e = write_new_file(cert_path, 0644, [&](BIO* b) { return PEM_write_bio_X509(b, cert.get()) == 1; })) {
            ::unlink(key_path.c_str());
            return e;
        }
    } catch (const std::runtime_error& e) {
        return std::string(e.what());
    }
    return std::nullopt;
}

boost::system::result<certificate_authority, std::string> certificate_authority::load(const std::string& cert_file,
                                                                                      const std::string& key_file) {
    std::unique_ptr<FILE, decltype(&std::fclose)> cf(std::fopen(cert_file.c_str(), "r"), std::fclose);
    if (!cf) return cert_file + ": " + std::strerror(errno);
    cert_ptr cert = own(PEM_read_X509(cf.get(), nullptr, nullptr, nullptr));
    if (!cert) return cert_file + ": not a PEM certificate (" + openssl_error() + ")";
    if (X509_check_ca(cert.get()) < 1) return cert_file + ": not a CA certificate (basicConstraints CA:TRUE is missing)";

    struct stat st;
    if (::stat(key_file.c_str(), &st) != 0) return key_file + ": " + std::strerror(errno);
    if (st.st_mode & S_IROTH) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return key_file + ": the CA key is readable by every user (mode " + mode + "); chmod 600 it";
    }
    std::unique_ptr<FILE, decltype(&std::fclose)> kf(std::fopen(key_file.c_str(), "r"), std::fclose);
    if (!kf) return key_file + ": " + std::strerror(errno);
    key_ptr key = own(PEM_read_PrivateKey(kf.get(), nullptr, nullptr, nullptr));
    if (!key) return key_file + ": not a PEM private key, or one with a passphrase (" + openssl_error() + ")";
    if (X509_check_private_key(cert.get(), key.get()) != 1) {
        ERR_clear_error();
        return key_file + ": does not match the certificate in " + cert_file;
    }
    return certificate_authority(std::move(cert), std::move(key));
}

leaf certificate_authority::mint(std::string_view name, system_time now, std::chrono::seconds lifetime) const {
    const key_ptr key = new_p256_key();
    const cert_ptr cert = own(X509_new());
    if (!cert || !X509_set_version(cert.get(), 2)) fail("certificate");
    set_random_serial(cert.get());
    const system_time until = std::min(now + lifetime, not_after_of(cert_.get()));
    set_validity(cert.get(), now - clock_skew, until);
    set_name(X509_get_subject_name(cert.get()), name);
    if (!X509_set_issuer_name(cert.get(), X509_get_subject_name(cert_.get()))) fail("issuer");
    if (!X509_set_pubkey(cert.get(), key.get())) fail("public key");
    add_text_extension(cert.get(), cert_.get(), NID_basic_constraints, "critical,CA:FALSE");
    add_text_extension(cert.get(), cert_.get(), NID_key_usage, "critical,digitalSignature");
    add_text_extension(cert.get(), cert_.get(), NID_ext_key_usage, "serverAuth");
    add_text_extension(cert.get(), cert_.get(), NID_subject_key_identifier, "hash");
    add_text_extension(cert.get(), cert_.get(), NID_authority_key_identifier, "keyid:always");
    add_subject_alt_name(cert.get(), name);
    if (!X509_sign(cert.get(), key_.get(), EVP_sha256())) fail("signing");
    // OpenSSL works out a certificate's extensions lazily, on first use, and many
    // handshakes on many threads share a leaf: done here, before it is shared.
    X509_check_purpose(cert.get(), -1, 0);
    return leaf{cert, key, until};
}

leaf_cache::leaf_cache(certificate_authority ca, std::size_t capacity, std::chrono::seconds lifetime)
    : ca_(std::move(ca)), capacity_(std::max<std::size_t>(1, capacity)), lifetime_(lifetime) {}

bool leaf_cache::fresh(const entry& e, system_time now) const {
    return e.current.cert && now < e.current.not_after - lifetime_ / 4;
}

leaf leaf_cache::get(const std::string& name, system_time now, bool* minted) {
    if (minted) *minted = false;
    std::unique_lock lock(mutex_);
    for (;;) {
        auto it = entries_.find(name);
        if (it == entries_.end()) {
            recency_.push_front(name);
            auto fresh_entry = std::make_shared<entry>();
            fresh_entry->recency = recency_.begin();
            it = entries_.emplace(name, std::move(fresh_entry)).first;
        } else {
            recency_.splice(recency_.begin(), recency_, it->second->recency);
        }
        // Held, not looked up again: eviction may drop it from the map meanwhile.
        const std::shared_ptr<entry> e = it->second;
        if (e->minting) {  // another thread is minting this name: its leaf, not a second one
            minted_.wait(lock, [&] { return !e->minting; });
            if (!fresh(*e, now)) continue;  // its mint failed: try again
        }
        if (fresh(*e, now)) {
            ++counts_.cached;
            return e->current;
        }
        e->minting = true;
        lock.unlock();
        leaf made;
        try {
            made = ca_.mint(name, now, lifetime_);
        } catch (...) {
            lock.lock();
            e->minting = false;
            minted_.notify_all();
            throw;
        }
        lock.lock();
        e->current = made;
        e->minting = false;
        ++counts_.minted;
        if (minted) *minted = true;
        evict_beyond_capacity();
        minted_.notify_all();
        return made;
    }
}

void leaf_cache::evict_beyond_capacity() {
    // Oldest first; a name being minted is kept (its minter stores the leaf into it).
    for (auto r = recency_.end(); entries_.size() > capacity_ && r != recency_.begin();) {
        --r;
        auto e = entries_.find(*r);
        if (e->second->minting) continue;
        entries_.erase(e);
        r = recency_.erase(r);
    }
}

leaf_cache::counts leaf_cache::totals() const {
    std::lock_guard lock(mutex_);
    return counts_;
}

std::size_t leaf_cache::size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

}  // namespace politeproxy::tls
