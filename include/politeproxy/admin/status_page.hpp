#pragma once
// The admin listener's live status page: `/` (HTML) and `/status.js` (its script), fixed
// text compiled in. The script reads `/hosts` and `/api/overrides` every second and draws
// the busiest hosts and every override (the API's and the registry's); the fleet store's
// state comes from the `Politeproxy-Fleet-Store` header of `/hosts`. Each host row and API
// override row has pause / resume / set limit buttons that call the control API with the
// Bearer token typed into the page (kept in the tab's sessionStorage only) and show its
// answer, an error with its field included, as text. Without admin.token_file the page is
// read-only: the API answers 403 and the page says so.
// Every value is drawn as text (textContent), never as markup: host names come from clients.
#include <string_view>

namespace politeproxy {

std::string_view status_page_html();
/// The script (proxy/admin/status_script.cpp): every listener is attached there, none inline.
std::string_view status_page_script();
/// The Content-Security-Policy both are served with: scripts only from the listener.
std::string_view status_page_policy();

}  // namespace politeproxy
