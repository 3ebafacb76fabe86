// Boost.JSON compiled once for the whole program (Debian ships its headers, not libboost-json).
#include <boost/json/src.hpp>
