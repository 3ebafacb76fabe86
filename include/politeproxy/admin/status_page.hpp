#pragma once
// The admin listener's live status page: `/` (HTML) and `/status.js` (its script), fixed
// text compiled in. The script reads `/hosts` every second and draws the busiest hosts;
// the fleet store's state comes from the `Politeproxy-Fleet-Store` header of `/hosts`.
// Every value is drawn as text (textContent), never as markup: host names come from clients.
#include <string_view>

namespace politeproxy {

std::string_view status_page_html();
std::string_view status_page_script();
/// The Content-Security-Policy both are served with: scripts only from the listener.
std::string_view status_page_policy();

}  // namespace politeproxy
