#include "politeproxy/policy/public_suffixes.hpp"

#include "politeproxy/policy/address_filter.hpp"

#include <libpsl.h>

#include <stdexcept>

namespace politeproxy {
namespace {

psl_ctx_t* load() {
    // psl_latest: the system's list (package publicsuffix) or the built-in one, whichever
    // is newer; psl_builtin when there is no file at all.
    psl_ctx_t* p = psl_latest(nullptr);
    if (!p) p = const_cast<psl_ctx_t*>(psl_builtin());
    if (!p) throw std::runtime_error("key: domain needs the Public Suffix List (Debian package publicsuffix)");
    return p;
}

void release(psl_ctx_t* p) {
    if (p != psl_builtin()) psl_free(p);
}

}  // namespace

public_suffixes::public_suffixes() : psl_(load(), &release) {}

public_suffixes::~public_suffixes() = default;

std::string public_suffixes::registrable_domain(std::string_view host_key) const {
    if (host_key.find('.') == std::string_view::npos || parse_ip(host_key)) return std::string(host_key);
    const std::string host(host_key);
    const char* domain = psl_registrable_domain(psl_.get(), host.c_str());
    return domain ? std::string(domain) : host;
}

}  // namespace politeproxy
