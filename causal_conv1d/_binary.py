"""Reads ELF shared objects straight from the file: which GPU code objects a built library
carries, and which libraries a library needs.

A HIP build embeds its device code in the ELF section ``.hip_fatbin`` as one or more clang offload
bundles (one per translation unit), each listing entries such as
``hipv4-amdgcn-amd-amdhsa--gfx1201``. Reading them needs no ROCm tools and no GPU.

This module uses only the standard library and imports nothing of the package: the build's
cmake/torch_query.py loads it by path at configure time (DT_NEEDED and DT_SONAME of PyTorch's
libraries), before the package exists.
"""

import mmap
import struct

_BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
_COMPRESSED_MAGIC = b"CCOB"

_SHT_DYNAMIC = 6
_DT_NULL, _DT_NEEDED, _DT_SONAME = 0, 1, 14


def _map(path):
    """The file's bytes, memory-mapped (shared libraries can be hundreds of MB)."""
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _sections(data):
    """(name, type, offset, size, link) of every section of a little-endian ELF64 file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQI", data, shoff + i * shentsize) for i in range(shnum)]
    names_off = headers[shstrndx][4]
    sections = []
    for sh_name, sh_type, _flags, _addr, sh_offset, sh_size, sh_link in headers:
        start = names_off + sh_name
        name = data[start : data.find(b"\0", start)].decode()
        sections.append((name, sh_type, sh_offset, sh_size, sh_link))
    return sections


def _elf_section(data, name):
    """The bytes of the named section, or None."""
    for sec_name, _type, offset, size, _link in _sections(data):
        if sec_name == name:
            return data[offset : offset + size]
    return None


def dynamic(path):
    """(DT_NEEDED names, DT_SONAME) of a shared object; ([], "") when it is no little-endian
    ELF64 file or has no dynamic section."""
    try:
        data = _map(path)
    except ValueError:  # an empty file
        return [], ""
    with data:
        try:
            sections = _sections(data)
        except ValueError:
            return [], ""
        for _name, sh_type, offset, size, link in sections:
            if sh_type != _SHT_DYNAMIC:
                continue
            strtab = sections[link][2]

            def string(off):
                start = strtab + off
                return data[start : data.find(b"\0", start)].decode()

            needed, soname = [], ""
            for entry in range(offset, offset + size, 16):
                tag, val = struct.unpack_from("<qQ", data, entry)
                if tag == _DT_NULL:
                    break
                if tag == _DT_NEEDED:
                    needed.append(string(val))
                elif tag == _DT_SONAME:
                    soname = string(val)
            return needed, soname
    return [], ""


def offload_targets(path):
    """Sorted offload-bundle entry ids (e.g. 'hipv4-amdgcn-amd-amdhsa--gfx1201') in a library."""
    with _map(path) as data:
        section = _elf_section(data, ".hip_fatbin")
    if section is None:
        return []
    if _COMPRESSED_MAGIC in section[:64]:
        raise ValueError(f"{path}: compressed offload bundles are not supported by this reader")
    targets = set()
    pos = section.find(_BUNDLE_MAGIC)
    while pos != -1:
        count, = struct.unpack_from("<Q", section, pos + len(_BUNDLE_MAGIC))
        entry = pos + len(_BUNDLE_MAGIC) + 8
        for _ in range(count):
            _offset, _size, id_len = struct.unpack_from("<QQQ", section, entry)
            targets.add(section[entry + 24 : entry + 24 + id_len].decode())
            entry += 24 + id_len
        pos = section.find(_BUNDLE_MAGIC, entry)
    return sorted(targets)


def gpu_archs(path):
    """AMD GPU archs (e.g. ['gfx1201', 'gfx942']) with device code in the library."""
    archs = set()
    for target in offload_targets(path):
        if "amdgcn-amd-amdhsa" in target:
            archs.add(target.rsplit("--", 1)[1])
    return sorted(archs)
