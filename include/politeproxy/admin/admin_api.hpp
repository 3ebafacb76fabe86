#pragma once
// The admin listener's control API (SPEC.md "Admin API"): hosts and their overrides as
// JSON under /api/, writes with a Bearer token from admin.token_file.
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace politeproxy {

struct admin_view;

using admin_request = boost::beast::http::request<boost::beast::http::string_body>;
using admin_response = boost::beast::http::response<boost::beast::http::string_body>;

/// Answers a request for /api/... into `res` (status, content type and body):
///   GET /api/hosts?sort=key|waiting|in_flight|throttled&filter=TEXT&limit=N&after=KEY
///       {"hosts": [...], "next": KEY or null}: a page of tracked hosts (each as in /hosts);
///       `after` is the last key of the previous page, `filter` a part of the key.
///   GET /api/hosts/{key}: one host, tracked or overridden (404 otherwise). {key} is a
///       host (name or address, any spelling); under `key: domain` its domain's gate.
///   PUT /api/hosts/{key}/override: the body (policy/live_override) becomes its override.
///   DELETE /api/hosts/{key}/override: back to the registry and health (404: none).
///   GET /api/overrides?filter=TEXT&limit=N&after=KEY: {"overrides": [...], "next": ...},
///       the API's and the registry's, each with its source, by key.
///   GET /api/clients: the clients (clients:) with their counts (admin/hosts_view.hpp).
/// Writes need `Authorization: Bearer TOKEN` (401 without a known one; 403 when no
/// admin.token_file makes the API read-only); a bad body is a 400 naming the field.
void answer_api(const admin_view& view, const admin_request& req, admin_response& res);

}  // namespace politeproxy
