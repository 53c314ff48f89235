"""Reads which GPU code objects a built library carries, straight from the file.

A HIP build embeds its device code in the ELF section ``.hip_fatbin`` as one or more clang offload
bundles (one per translation unit), each listing entries such as
``hipv4-amdgcn-amd-amdhsa--gfx1201``. Reading them needs no ROCm tools and no GPU.
"""

import struct

_BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
_COMPRESSED_MAGIC = b"CCOB"


def _elf_section(data, name):
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = []
    for i in range(shnum):
        sh_name, _type, _flags, _addr, sh_offset, sh_size = struct.unpack_from(
            "<IIQQQQ", data, shoff + i * shentsize
        )
        sections.append((sh_name, sh_offset, sh_size))
    _, str_off, str_size = sections[shstrndx]
    strtab = data[str_off : str_off + str_size]
    for sh_name, off, size in sections:
        end = strtab.index(b"\0", sh_name)
        if strtab[sh_name:end].decode() == name:
            return data[off : off + size]
    return None


def offload_targets(path):
    """Sorted offload-bundle entry ids (e.g. 'hipv4-amdgcn-amd-amdhsa--gfx1201') in a library."""
    with open(path, "rb") as f:
        data = f.read()
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
