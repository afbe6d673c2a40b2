/* 3GPP TS 36.213 tables used by the cell model (values generated into lte_tables.c). */
#ifndef CELLAB_LTE_TABLES_H
#define CELLAB_LTE_TABLES_H

struct lte_sr_cfg {
    int i_sr_min, i_sr_max, period_ms, offset_base;
};

extern const int lte_cqi_eff_x10000[16];
extern const int lte_cqi_snr10_x100[16];
extern const int lte_dl_mcs_itbs[29];
extern const int lte_dl_mcs_qm[29];
extern const int lte_ul_mcs_itbs[29];
extern const int lte_tbs_bits[27][110];
extern const struct lte_sr_cfg lte_sr_table[];
extern const int lte_sr_table_len;

#endif
