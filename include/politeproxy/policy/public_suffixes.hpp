#pragma once
// `key: domain`: the registrable domain of a host name, from the Public Suffix List
// through libpsl (Debian's publicsuffix data, or libpsl's built-in copy when newer);
// no suffix list is written here by hand.
#include <memory>
#include <string>
#include <string_view>

struct psl_ctx_st;

namespace politeproxy {

/// Thread safety: const after construction; registrable_domain() from any thread.
class public_suffixes {
public:
    /// Loads the newest list the system has (throws when none can be loaded).
    public_suffixes();
    ~public_suffixes();
    public_suffixes(const public_suffixes&) = delete;
    public_suffixes& operator=(const public_suffixes&) = delete;

    /// The registrable domain (public suffix + one label) of `host_key`, a lower-case host
    /// name: "a.b.example.co.uk" -> "example.co.uk", "x.user.github.io" -> "user.github.io"
    /// (private suffixes count), "site.test" for any "*.site.test" (an unlisted TLD is one
    /// label). An address, a public suffix itself ("co.uk") or a one-label name stays as it is.
    std::string registrable_domain(std::string_view host_key) const;

private:
    std::unique_ptr<psl_ctx_st, void (*)(psl_ctx_st*)> psl_;
};

}  // namespace politeproxy
