#!/bin/bash
# Checks the layer rules of the house style (STYLE.md): a library includes only the project
# headers and external libraries in its brackets.
#
#   common        [GLib]                     no project headers but its own
#   xml           [common]                   + libxml2
#   hotplug       [common, xml]              + libpci (the libpci adapter lives here), libnl
#   policies      [common]
#   engine        [common, xml, hotplug, policies]   + libxml2, json-glib, libvirt, libsoup
#   hotmigd       [common, xml, hotplug, policies, engine]   + json-glib, libsoup
#   migrate-vm    [common, xml, hotplug, policies, engine]   + json-glib
#   guest-agent   [common]                   + json-glib, verbs, libnl (its RDMA netlink adapter)
#   guest-agent/libhotmig: no project headers, libc and pthreads only
#
# So the engine includes neither the daemon (hotmigd/) nor the command line (migrate-vm/), and
# the daemon never includes the command line.
# An external library with adapter files (sole_adapter) may be included by those files only:
# libvirt by the engine's libvirt adapter, libpci by the libpci adapter, libnl by the netlink
# adapters (the host's, hotplug/, and the agent's RDMA netlink, guest-agent/: two programs), libsoup by hotmigd's HTTPS server and the engine's hotmigd client (one adapter on
# each side of the wire, docs/decisions.md).
# Also: no "../" includes; no library includes another library's *-priv.h (internals are
# for tests only); no circular includes between the files of a folder (a file and its header
# count as one: daemon.c and daemon.h). tests/ and lab/ are not libraries and are not checked.
#
# Usage: layering-check.sh SOURCE_DIR    check the tree, print every violation, exit 1 if any
#        layering-check.sh --self-test   prove the check catches what it claims to
set -u

# Project headers a library may include, by folder ("self" is always allowed).
allowed_project() {
    case "$1" in
    common) echo "" ;;
    xml) echo "common" ;;
    hotplug) echo "common xml" ;;
    policies) echo "common" ;;
    engine) echo "common xml hotplug policies" ;;
    hotmigd | migrate-vm) echo "common xml hotplug policies engine" ;;
    guest-agent) echo "common" ;;
    libhotmig) echo "" ;;
    esac
}

# External libraries a library may include.
allowed_external() {
    case "$1" in
    common) echo "glib" ;;
    xml) echo "glib libxml" ;;
    hotplug) echo "glib libpci libnl" ;;
    policies) echo "glib" ;;
    engine) echo "glib libxml json libvirt libsoup" ;;
    hotmigd) echo "glib json libsoup" ;;
    migrate-vm) echo "glib json" ;;
    guest-agent) echo "glib json verbs libnl" ;;
    libhotmig) echo "" ;;
    esac
}

# The external library an <angle> include belongs to, or "" for libc/system headers.
external_of() {
    case "$1" in
    glib.h | glib/* | gio/* | glib-object.h | glib-unix.h | gmodule.h | gobject/*) echo glib ;;
    libxml/*) echo libxml ;;
    libvirt/*) echo libvirt ;;
    pci/*) echo libpci ;;
    infiniband/* | rdma/*) echo verbs ;;
    json-glib/*) echo json ;;
    cmocka.h) echo cmocka ;;
    netlink/*) echo libnl ;;
    libsoup/*) echo libsoup ;;
    *) echo "" ;;
    esac
}

# The files that may include an external library, for those that have adapters (STYLE.md:
# "Only one file per external library talks to it"; libsoup has two, the server and the client,
# docs/decisions.md); "" when not enforced.
sole_adapter() {
    case "$1" in
    libnl) echo "hotplug/netlink-libnl.c guest-agent/agent/rdma-link.c" ;;
    libpci) echo "hotplug/pci-libpci.c" ;;
    libvirt) echo "engine/virt-libvirt.c" ;;
    libsoup) echo "hotmigd/server.c engine/hotmigd-client-soup.c" ;;
    *) echo "" ;;
    esac
}

libraries="common xml hotplug policies engine hotmigd migrate-vm guest-agent"
project_dirs="$libraries lab tests"

in_list() {
    local x="$1" w
    shift
    for w in $*; do
        [ "$w" = "$x" ] && return 0
    done
    return 1
}

# check_file ROOT FILE LIB: prints violations, returns 1 if any.
check_file() {
    local root="$1" file="$2" lib="$3" bad=0 line n inc kind top ext self
    self="$lib"
    [ "$lib" = libhotmig ] && self="guest-agent/libhotmig"
    while IFS=: read -r n line; do
        inc=$(printf '%s' "$line" | sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*([<"])([^>"]*)[>"].*/\1\2/p')
        [ -n "$inc" ] || continue
        kind="${inc:0:1}"
        inc="${inc:1}"
        case "$inc" in
        ../* | */../*)
            echo "${file#"$root"/}:$n: relative include \"$inc\": include public headers with their folder"
            bad=1
            continue
            ;;
        esac
        if [ "$kind" = '"' ]; then
            case "$inc" in
            */*) ;;
            *) continue ;; # a header next to the file
            esac
            top="${inc%%/*}"
            if [ "$lib" = libhotmig ]; then
                case "$inc" in
                guest-agent/libhotmig/*) continue ;;
                esac
                echo "${file#"$root"/}:$n: libhotmig includes project header \"$inc\": it depends on libc and pthreads only"
                bad=1
                continue
            fi
            in_list "$top" $project_dirs || continue
            case "$inc" in
            "$self"/*) continue ;;
            *-priv.h)
                echo "${file#"$root"/}:$n: $lib includes \"$inc\", another library's internals (for tests only)"
                bad=1
                continue
                ;;
            esac
            if ! in_list "$top" $(allowed_project "$lib"); then
                echo "${file#"$root"/}:$n: $lib includes \"$inc\": $lib may use only [$(allowed_project "$lib")]"
                bad=1
            fi
        else
            ext=$(external_of "$inc")
            [ -n "$ext" ] || continue
            if ! in_list "$ext" $(allowed_external "$lib"); then
                echo "${file#"$root"/}:$n: $lib includes <$inc> ($ext): $lib may use only [$(allowed_external "$lib")]"
                bad=1
            elif [ -n "$(sole_adapter "$ext")" ] && ! in_list "${file#"$root"/}" $(sole_adapter "$ext"); then
                echo "${file#"$root"/}:$n: includes <$inc> ($ext): only $(sole_adapter "$ext") talks to $ext"
                bad=1
            fi
        fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include' "$file")
    return $bad
}

# The module a file belongs to: its name without .c, .h and -priv (daemon.c, daemon.h -> daemon).
module_of() {
    local m="${1##*/}"
    m="${m%.[ch]}"
    echo "${m%-priv}"
}

# check_cycles ROOT DIR: prints each loop of includes between the modules of DIR (its own
# files, not its subfolders), returns 1 if any.
check_cycles() {
    local root="$1" dir="$2" rel file inc edges="" loops
    rel="${dir#"$root"/}"
    while IFS= read -r -d '' file; do
        while IFS= read -r inc; do
            case "$inc" in
            "$rel"/*) inc="${inc#"$rel"/}" ;;
            */*) continue ;;
            esac
            [ -f "$dir/$inc" ] || continue
            [ "$(module_of "$file")" = "$(module_of "$inc")" ] && continue
            edges+="$(module_of "$file") $(module_of "$inc")"$'\n'
        done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1/p' "$file")
    done < <(find "$dir" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \) -print0)
    [ -n "$edges" ] || return 0
    loops=$(printf '%s' "$edges" | tsort 2>&1 >/dev/null | grep -v 'input contains a loop')
    [ -z "$loops" ] && return 0
    echo "$rel: circular includes between $(echo $loops | sed 's/tsort: //g'):" \
        "a module includes another that includes it back"
    return 1
}

# check_tree ROOT [--complete]: --complete (the real tree) also requires every library folder
# to hold C files: a check of zero files (a wrong path, a moved folder) proves nothing.
check_tree() {
    local root="$1" complete="${2:-}" bad=0 dir lib file sub n=0 before
    for dir in $libraries; do
        before=$n
        if [ ! -d "$root/$dir" ]; then
            [ -z "$complete" ] || { echo "layering-check: no folder $root/$dir"; bad=1; }
            continue
        fi
        while IFS= read -r -d '' file; do
            lib="$dir"
            case "$file" in
            "$root"/guest-agent/libhotmig/*) lib=libhotmig ;;
            esac
            n=$((n + 1))
            check_file "$root" "$file" "$lib" || bad=1
        done < <(find "$root/$dir" -type f \( -name '*.c' -o -name '*.h' \) -print0)
        while IFS= read -r -d '' sub; do
            check_cycles "$root" "$sub" || bad=1
        done < <(find "$root/$dir" -type d -print0)
        if [ -n "$complete" ] && [ "$n" -eq "$before" ]; then
            echo "layering-check: no C file under $root/$dir: nothing of $dir was checked"
            bad=1
        fi
    done
    if [ "$n" -eq 0 ]; then
        echo "layering-check: no C file found under $root: nothing was checked"
        return 1
    fi
    if [ $bad -ne 0 ]; then
        echo "layering-check: violations found (rules: STYLE.md, 'Layout shows the architecture')"
        return 1
    fi
    echo "layering-check: $n files follow the layer rules"
    return 0
}

self_test() {
    local tmp fail=0
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    mkdir -p "$tmp"/{common,xml,hotplug,policies,engine,hotmigd,migrate-vm,guest-agent/libhotmig}
    # One good file, so that a case's tree never has zero files to check.
    printf '#include <glib.h>\n' >"$tmp/common/base.c"

    expect() { # expect ok|bad FILE CONTENT
        local want="$1" file="$2"
        mkdir -p "$(dirname "$tmp/$file")"
        printf '%s\n' "$3" >"$tmp/$file"
        if check_tree "$tmp" >/dev/null; then got=ok; else got=bad; fi
        if [ "$got" != "$want" ]; then
            echo "self-test: $file with '$3': expected $want, got $got"
            fail=1
        fi
        rm -f "$tmp/$file"
    }

    expect ok common/c.c '#include "common/common.h"'
    expect ok common/c.c '#include <glib.h>'
    expect bad common/c.c '#include "xml/xml.h"'
    expect bad common/c.c '#include <libxml/tree.h>'
    expect ok xml/x.c '#include "common/common.h"'
    expect ok xml/x.c '#include <libxml/parser.h>'
    expect ok xml/x.c '#include "xml/xml-priv.h"'
    expect bad xml/x.c '#include "hotplug/hotplug.h"'
    expect bad xml/x.c '#  include "engine/engine.h"'
    expect bad xml/x.c '#include <libvirt/libvirt.h>'
    expect bad xml/x.c '#include "../hotplug/hotplug.h"'
    expect ok hotplug/h.c '#include "xml/xml.h"'
    expect bad hotplug/h.c '#include "xml/xml-priv.h"'
    expect bad hotplug/h.c '#include "policies/policies.h"'
    expect bad hotplug/h.c '#include <libxml/tree.h>'
    expect ok hotplug/netlink-libnl.c '#include <netlink/route/link/sriov.h>'
    expect bad hotplug/h.c '#include <netlink/netlink.h>'
    expect bad engine/o.c '#include <netlink/route/link.h>'
    expect bad xml/x.c '#include <netlink/netlink.h>'
    expect ok hotmigd/server.c '#include <libsoup/soup.h>'
    expect ok engine/hotmigd-client-soup.c '#include <libsoup/soup.h>'
    expect bad engine/migration.c '#include <libsoup/soup.h>'
    expect bad hotmigd/daemon.c '#include <libsoup/soup.h>'
    expect bad migrate-vm/main.c '#include <libsoup/soup.h>'
    expect ok engine/virt-libvirt.c '#include <libvirt/libvirt.h>'
    expect bad engine/migration.c '#include <libvirt/libvirt.h>'
    expect bad hotmigd/host.c '#include <libvirt/libvirt.h>'
    expect ok hotplug/pci-libpci.c '#include <pci/pci.h>'
    expect bad hotplug/sysfs.c '#include <pci/pci.h>'
    expect ok hotmigd/d.c '#include "engine/engine.h"'
    expect ok migrate-vm/m.c '#include "engine/engine.h"'
    expect bad engine/e.c '#include "hotmigd/daemon.h"'
    expect bad engine/e.c '#include "migrate-vm/commands.h"'
    expect bad hotmigd/d.c '#include "migrate-vm/commands.h"'
    expect bad migrate-vm/m.c '#include "hotmigd/daemon.h"'
    expect bad hotmigd/d.c '#include "engine/preflight-priv.h"'
    expect bad hotplug/h.c '#include <libsoup/soup.h>'
    expect bad policies/p.c '#include "hotplug/hotplug.h"'
    expect bad policies/p.c '#include <libvirt/libvirt.h>'
    expect ok engine/o.c '#include "hotplug/hotplug.h"'
    expect bad engine/o.c '#include "hotplug/hotplug-priv.h"'
    expect ok guest-agent/a.c '#include "common/common.h"'
    expect bad guest-agent/a.c '#include "xml/xml.h"'
    expect ok guest-agent/libhotmig/l.c '#include "guest-agent/libhotmig/hotmig.h"'
    expect ok guest-agent/libhotmig/l.c '#include <pthread.h>'
    expect ok guest-agent/libhotmig/l.c '#include "hotmig-priv.h"'
    expect bad guest-agent/libhotmig/l.c '#include <glib.h>'
    expect bad guest-agent/libhotmig/l.c '#include "common/common.h"'
    expect ok lab/whatever.c '#include "engine/x-priv.h"'

    # Circular includes between the modules of one folder.
    printf '#include "hotmigd/b.h"\n' >"$tmp/hotmigd/a.c"
    printf '#include "hotmigd/a.h"\n' >"$tmp/hotmigd/a.h"
    printf '\n' >"$tmp/hotmigd/a-priv.h"
    expect ok hotmigd/b.h '#include "common/common.h"'
    expect bad hotmigd/b.h '#include "hotmigd/a.h"'
    expect bad hotmigd/b.h '#include "a-priv.h"'
    rm -f "$tmp"/hotmigd/a.c "$tmp"/hotmigd/a.h "$tmp"/hotmigd/a-priv.h
    # Zero files checked is a failure, not a pass; so is a library folder without files.
    rm -f "$tmp/common/base.c"
    if check_tree "$tmp" >/dev/null; then
        echo "self-test: a tree without C files passed"
        fail=1
    fi
    printf '#include <glib.h>\n' >"$tmp/common/c.c"
    if check_tree "$tmp" --complete >/dev/null; then
        echo "self-test: --complete passed with only common/ holding a file"
        fail=1
    fi
    rm -f "$tmp/common/c.c"

    if [ $fail -ne 0 ]; then
        echo "layering-check: self-test FAILED"
        return 1
    fi
    echo "layering-check: self-test passed"
    return 0
}

case "${1:-}" in
--self-test) self_test ;;
"")
    echo "usage: $0 SOURCE_DIR | --self-test" >&2
    exit 2
    ;;
*) check_tree "$1" --complete ;;
esac
