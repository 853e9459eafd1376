//! The view contract, property-tested: on arbitrary bytes, once `new_checked` succeeds no
//! accessor and no `Repr::parse` panics.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..128)
}

const CAPS: ChecksumCaps = ChecksumCaps {
    ipv4: Checksum::Both,
    tcp: Checksum::Both,
    udp: Checksum::Both,
    icmpv4: Checksum::Both,
    icmpv6: Checksum::Both,
    sctp: Checksum::Both,
};

proptest! {
    #[test]
    fn ethernet_checked_view_never_panics(data in bytes()) {
        if let Ok(f) = ethernet::Frame::new_checked(&data[..]) {
            let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.payload().len());
            let _ = ethernet::Repr::parse(&f);
        }
    }

    #[test]
    fn vlan_checked_view_never_panics(data in bytes()) {
        if let Ok(t) = vlan::Tag::new_checked(&data[..]) {
            let _ = (t.tci(), t.pcp(), t.dei(), t.vid(), t.ethertype(), t.payload().len());
            let _ = vlan::Repr::parse(&t);
        }
        let _ = vlan::TagIter::new(ethernet::EtherType::QinQ, &data).count();
    }

    #[test]
    fn mpls_checked_view_never_panics(data in bytes()) {
        if let Ok(l) = mpls::Lse::new_checked(&data[..]) {
            let _ = (l.raw(), l.label(), l.tc(), l.bos(), l.ttl(), l.payload().len());
            let _ = mpls::Repr::parse(&l);
        }
        let _ = mpls::LabelStack::new(&data).count();
    }

    #[test]
    fn arp_checked_view_never_panics(data in bytes()) {
        if let Ok(p) = arp::Packet::new_checked(&data[..]) {
            let _ = (p.hardware_type(), p.protocol_type(), p.operation());
            let _ = (p.source_hardware_addr(), p.source_protocol_addr());
            let _ = (p.target_hardware_addr(), p.target_protocol_addr());
            let _ = arp::Repr::parse(&p);
        }
    }

    #[test]
    fn ipv4_checked_view_never_panics(data in bytes()) {
        if let Ok(p) = ipv4::Packet::new_checked(&data[..]) {
            let _ = (p.version(), p.dscp(), p.ecn(), p.ident(), p.is_fragment(), p.frag_offset());
            let _ = (p.hop_limit(), p.protocol(), p.src_addr(), p.dst_addr(), p.checksum());
            let _ = (p.options().len(), p.payload().len(), p.verify_checksum());
            let _ = ipv4::Repr::parse(&p, &CAPS);
        }
    }

    #[test]
    fn ipv6_checked_view_never_panics(data in bytes()) {
        if let Ok(p) = ipv6::Packet::new_checked(&data[..]) {
            let _ = (p.version(), p.traffic_class(), p.flow_label(), p.next_header());
            let _ = (p.hop_limit(), p.src_addr(), p.dst_addr(), p.payload().len());
            let _ = ipv6::Repr::parse(&p);
            let _ = ipv6::walk(p.next_header(), p.payload());
        }
        for kind in [ip::Protocol::HopByHop, ip::Protocol::Ah, ip::Protocol::Ipv6Frag] {
            if let Ok(h) = ipv6::ExtHeader::new_checked(&data[..], kind) {
                let _ = (h.next_header(), h.data().len(), h.payload().len());
            }
        }
        if let Ok(f) = ipv6::FragmentHeader::new_checked(&data[..]) {
            let _ = ipv6::FragmentRepr::parse(&f);
        }
    }

    #[test]
    fn l4_checked_views_never_panic(data in bytes(), v6: bool) {
        let (s, d): (ip::Address, ip::Address) = if v6 {
            (Ipv6Addr::LOCALHOST.into(), Ipv6Addr::UNSPECIFIED.into())
        } else {
            (Ipv4Addr::LOCALHOST.into(), Ipv4Addr::BROADCAST.into())
        };
        if let Ok(p) = tcp::Packet::new_checked(&data[..]) {
            let _ = (p.src_port(), p.dst_port(), p.seq_number(), p.ack_number(), p.flags());
            let _ = (p.window_len(), p.urgent_at(), p.options().len(), p.payload().len());
            let _ = tcp::Repr::parse(&p, &s, &d, &CAPS);
        }
        if let Ok(p) = udp::Packet::new_checked(&data[..]) {
            let _ = (p.src_port(), p.dst_port(), p.len(), p.payload().len());
            let _ = udp::Repr::parse(&p, &s, &d, &CAPS);
        }
        if let Ok(p) = sctp::Packet::new_checked(&data[..]) {
            let _ = (p.verification_tag(), p.checksum(), p.payload().len());
            let _ = sctp::Repr::parse(&p, &CAPS);
        }
        if let Ok(p) = icmpv4::Packet::new_checked(&data[..]) {
            let _ = (p.msg_type(), p.msg_code(), p.echo_ident(), p.echo_seq_no(), p.data().len());
            let _ = icmpv4::Repr::parse(&p, &CAPS);
        }
        if let Ok(p) = icmpv6::Packet::new_checked(&data[..]) {
            let _ = (p.msg_type(), p.rest_of_header(), p.data().len(), p.is_nd());
            let _ = icmpv6::Repr::parse(&p, &Ipv6Addr::LOCALHOST, &Ipv6Addr::LOCALHOST, &CAPS);
            let _ = icmpv6::NdRepr::parse(&p);
        }
        let _ = icmpv6::NdOptionIter::new(&data).count();
    }

    #[test]
    fn tunnel_checked_views_never_panic(data in bytes()) {
        if let Ok(p) = vxlan::Packet::new_checked(&data[..]) {
            let _ = (p.flags(), p.vni(), p.group_policy_id(), p.payload().len());
            let _ = vxlan::Repr::parse(&p);
        }
        if let Ok(p) = geneve::Packet::new_checked(&data[..]) {
            let _ = (p.version(), p.oam(), p.critical(), p.protocol(), p.vni());
            let _ = (p.options().len(), p.payload().len());
            let _ = geneve::OptionIter::new(p.options()).count();
            let _ = geneve::Repr::parse(&p);
        }
        let _ = geneve::OptionIter::new(&data).count();
    }
}
