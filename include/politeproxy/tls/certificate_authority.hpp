#pragma once
// The local certificate authority of tls.mode intercept: the CA `--gen-ca` writes, the
// loader's checks of tls.ca_cert / tls.ca_key, and the leaf certificates it signs for
// each name a client connects to (ECDSA P-256), cached per name. OpenSSL does the
// cryptography; nothing here is hand-written crypto.
#include <boost/system/result.hpp>

#include <openssl/types.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace politeproxy::tls {

using system_time = std::chrono::system_clock::time_point;

/// A certificate or a key, shared: a cached leaf serves many handshakes at once.
using cert_ptr = std::shared_ptr<X509>;
using key_ptr = std::shared_ptr<EVP_PKEY>;

/// A leaf certificate and its key, for one name.
struct leaf {
    cert_ptr cert;
    key_ptr key;
    system_time not_after;
};

/// Writes DIR/ca.pem and DIR/ca.key (mode 0600): an ECDSA P-256 CA, CA:TRUE with
/// pathlen 0, valid for 10 years, named "politeproxy CA on <host>". Refuses to
/// overwrite either file. Returns the error, if any.
std::optional<std::string> generate_ca(const std::string& dir, std::string_view host);

class certificate_authority {
public:
    /// Loads and checks a CA: both files readable PEM, the key matches the certificate,
    /// the certificate is a CA, and the key file is not readable by every user. The
    /// error names the file and what is wrong with it.
    static boost::system::result<certificate_authority, std::string> load(const std::string& cert_file,
                                                                          const std::string& key_file);

    /// A new leaf for `name` (a DNS name, or an IPv4/IPv6 literal: an IP SAN), valid from
    /// an hour before `now` (clock skew) for `lifetime`, never past the CA's own expiry.
    leaf mint(std::string_view name, system_time now, std::chrono::seconds lifetime) const;

    X509* certificate() const { return cert_.get(); }

private:
    certificate_authority(cert_ptr cert, key_ptr key) : cert_(std::move(cert)), key_(std::move(key)) {}
    cert_ptr cert_;
    key_ptr key_;
};

/// Leaves per name, minted once: concurrent first connections to one name wait for one
/// mint, and a leaf is minted again when less than a quarter of its lifetime is left.
/// At most `capacity` names are kept; the least recently used goes first.
///
/// Thread safety: all members may be called from any thread.
class leaf_cache {
public:
    leaf_cache(certificate_authority ca, std::size_t capacity, std::chrono::seconds lifetime);

    /// The leaf for `name`; `*minted` (when given) says whether this call minted it.
    leaf get(const std::string& name, system_time now, bool* minted = nullptr);

    struct counts {
        std::uint64_t minted = 0;
        std::uint64_t cached = 0;
    };
    counts totals() const;
    std::size_t size() const;

private:
    struct entry {
        leaf current;
        bool minting = false;
        std::list<std::string>::iterator recency;  ///< its place in recency_
    };
    bool fresh(const entry& e, system_time now) const;
    void evict_beyond_capacity();

    const certificate_authority ca_;
    const std::size_t capacity_;
    const std::chrono::seconds lifetime_;
    mutable std::mutex mutex_;
    std::condition_variable minted_;
    std::unordered_map<std::string, std::shared_ptr<entry>> entries_;
    std::list<std::string> recency_;  ///< most recently used first
    counts counts_;
};

}  // namespace politeproxy::tls
